// The runtime interface: the only layer that talks to XLA. Everything above
// it sees opaque buffers and executables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::runtime {

// One array on one device. Reference counted; dropping the last reference
// from a thread without the GIL defers the release (see DeferredRelease).
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual const hlo::TensorType& type() const = 0;
  virtual int device() const = 0;
};
using BufferRef = std::shared_ptr<DeviceBuffer>;

class Executable {
 public:
  virtual ~Executable() = default;
  virtual int device() const = 0;
};
using ExecutableRef = std::shared_ptr<Executable>;

struct PlatformInfo {
  std::string platform;      // "cpu", "tpu", "gpu"
  std::string device_kind;   // jax's device_kind, e.g. "TPU v5 lite" or "cpu"
  bool virtual_tpu = false;  // true when tpu devices are emulated on XLA:CPU
  int64_t memory_bytes = 0;  // one device's memory (XLA's bytes_limit); 0 when XLA does not say (CPU)
  // XLA:CPU's device memory is malloc's: true when it keeps freed memory
  // for reuse (host_allocator.h), so that a program's temporaries cost no
  // fresh pages at each run.
  bool host_memory_kept = false;

  // Lowering rules that differ by platform ask these rather than compare
  // the name themselves (a virtual tpu on XLA:CPU is "cpu" here).
  bool is_tpu() const { return platform == "tpu"; }
  bool is_cpu() const { return platform == "cpu"; }
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual int device_count() = 0;
  virtual const PlatformInfo& platform() = 0;
  // Compile a StableHLO module for one device. Throws c10::Error naming
  // `what` (usually the ATen op) when XLA rejects it.
  virtual ExecutableRef compile(const std::string& stablehlo, int device, const std::string& what) = 0;
  virtual std::vector<BufferRef> execute(const Executable& exe, const std::vector<BufferRef>& args) = 0;
  // Copies `type.numel()` elements from host memory (the runtime keeps its
  // own copy, so `data` may be freed on return).
  virtual BufferRef to_device(const void* data, const hlo::TensorType& type, int device) = 0;
  // A new buffer of `type` whose every element is the bytes at `element`
  // (one per bool) (null: all zero bits, which is 0, 0.0 and false in
  // every dtype), written on the host and handed to the device: no program,
  // so no compile for any shape (exec/fill.h: constant fills; buffers fused
  // results are written into). On XLA:CPU the device buffer is that host
  // memory (zero-copy); elsewhere it is copied.
  virtual BufferRef filled(const hlo::TensorType& type, const void* element, int device) = 0;
  // Waits for the buffer and copies its bytes into `dst`.
  virtual void to_host(const BufferRef& buf, void* dst, size_t nbytes) = 0;
  virtual void synchronize(int device) = 0;
  // Programs compiled by XLA in this process.
  virtual int64_t compile_count() const = 0;
  // Wall time spent in XLA compiles in this process, in seconds.
  virtual double compile_seconds() const = 0;
};

// Holds the runtime's lock (the Python GIL, which the jax client needs) for
// a scope; re-entrant. The execution layer takes it once per op.
class RuntimeLock {
 public:
  RuntimeLock();
  ~RuntimeLock();
  RuntimeLock(const RuntimeLock&) = delete;
  RuntimeLock& operator=(const RuntimeLock&) = delete;

 private:
  int state_;
};

// The process-wide runtime, created on first use (this is where jax is
// imported, so `import torch` stays fast).
Runtime& get();
// True once get() has run; lets callers avoid starting the runtime.
bool started();
// True in a child forked after the runtime started: get() raises there.
bool in_bad_fork();

}  // namespace torch_tpu::runtime
