// StableHLO element and tensor types. This layer knows nothing of ATen:
// lowering rules translate ScalarType into these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::hlo {

enum class ElementType : uint8_t {
  kPred,  // i1
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64,   // complex<f32>
  kC128,  // complex<f64>
  // 8-bit floats: stored, moved, compared and converted; arithmetic on them
  // is refused, as CPU and CUDA refuse it (Builder::emit).
  kF8E4M3FN,
  kF8E5M2,
  kF8E4M3FNUZ,
  kF8E5M2FNUZ,
};
inline constexpr int kElementTypeCount = static_cast<int>(ElementType::kF8E5M2FNUZ) + 1;

// MLIR spelling of the element type ("f32", "bf16", "i1", "ui8", ...).
const char* element_name(ElementType e);
bool is_float(ElementType e);
bool is_float8(ElementType e);
bool is_complex(ElementType e);
// complex<f32> -> f32, complex<f64> -> f64; anything else unchanged.
ElementType complex_component(ElementType e);
bool is_signed_int(ElementType e);
bool is_unsigned_int(ElementType e);
inline bool is_integral(ElementType e) { return is_signed_int(e) || is_unsigned_int(e); }
int element_bits(ElementType e);

struct TensorType {
  ElementType element = ElementType::kF32;
  std::vector<int64_t> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  // "tensor<2x3xf32>", "tensor<f32>" for rank 0.
  std::string str() const;
  bool operator==(const TensorType& o) const { return element == o.element && dims == o.dims; }
};

}  // namespace torch_tpu::hlo
