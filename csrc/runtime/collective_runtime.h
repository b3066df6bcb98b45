// What the runtime offers distributed code (csrc/distributed): the job this
// process belongs to and programs replicated over several processes'
// devices. A collective is such a program (docs/design.md, "Distributed").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::runtime {

// The job, from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT). `active` only when WORLD_SIZE > 1: a
// single-process run never starts a coordinator.
struct JobInfo {
  bool active = false;
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string coordinator;  // host:port of jax's coordination service
  int init_timeout_s = 300;
  int heartbeat_timeout_s = 100;
};
// Reads the environment; starts nothing.
JobInfo job_from_env();
// The job the running runtime joined (starts the runtime).
const JobInfo& job();
// Appended to an invalid-device-index error: in a job each process owns
// one device, tpu:0, also named by the local rank ("" alone).
std::string job_device_hint();

// A collective failed (a peer died or timed out): the process then exits
// without waiting for the other ranks at the end of the job.
void note_job_failure();
bool job_failed();

// The global device id of process `process`'s device (starts the runtime).
int64_t process_device_id(int process);

// Compiles `text` (with mhlo.num_replicas = device_ids.size()) for replica i
// on global device device_ids[i]; this process runs the part of its local
// `device`. Results are labelled `out_types`.
ExecutableRef compile_replicated(const std::string& text, const std::vector<int64_t>& device_ids, int device,
                                 std::vector<hlo::TensorType> out_types, const std::string& what);

}  // namespace torch_tpu::runtime
