#include "hlo/types.h"

namespace torch_tpu::hlo {

const char* element_name(ElementType e) {
  switch (e) {
    case ElementType::kPred: return "i1";
    case ElementType::kI8: return "i8";
    case ElementType::kI16: return "i16";
    case ElementType::kI32: return "i32";
    case ElementType::kI64: return "i64";
    case ElementType::kU8: return "ui8";
    case ElementType::kU32: return "ui32";
    case ElementType::kU64: return "ui64";
    case ElementType::kF16: return "f16";
    case ElementType::kBF16: return "bf16";
    case ElementType::kF32: return "f32";
    case ElementType::kF64: return "f64";
    case ElementType::kC64: return "complex<f32>";
    case ElementType::kC128: return "complex<f64>";
    case ElementType::kF8E4M3FN: return "f8E4M3FN";
    case ElementType::kF8E5M2: return "f8E5M2";
    case ElementType::kF8E4M3FNUZ: return "f8E4M3FNUZ";
    case ElementType::kF8E5M2FNUZ: return "f8E5M2FNUZ";
  }
  return "?";
}

bool is_float(ElementType e) {
  return e == ElementType::kF16 || e == ElementType::kBF16 || e == ElementType::kF32 ||
         e == ElementType::kF64 || is_float8(e);
}

bool is_float8(ElementType e) {
  return e == ElementType::kF8E4M3FN || e == ElementType::kF8E5M2 || e == ElementType::kF8E4M3FNUZ ||
         e == ElementType::kF8E5M2FNUZ;
}

bool is_complex(ElementType e) { return e == ElementType::kC64 || e == ElementType::kC128; }

ElementType complex_component(ElementType e) {
  if (e == ElementType::kC64) return ElementType::kF32;
  if (e == ElementType::kC128) return ElementType::kF64;
  return e;
}

bool is_signed_int(ElementType e) {
  return e == ElementType::kI8 || e == ElementType::kI16 || e == ElementType::kI32 ||
         e == ElementType::kI64;
}

bool is_unsigned_int(ElementType e) {
  return e == ElementType::kU8 || e == ElementType::kU32 || e == ElementType::kU64;
}

int element_bits(ElementType e) {
  switch (e) {
    case ElementType::kPred: return 1;
    case ElementType::kI8: case ElementType::kU8: return 8;
    case ElementType::kF8E4M3FN: case ElementType::kF8E5M2: case ElementType::kF8E4M3FNUZ:
    case ElementType::kF8E5M2FNUZ: return 8;
    case ElementType::kI16: case ElementType::kF16: case ElementType::kBF16: return 16;
    case ElementType::kI32: case ElementType::kU32: case ElementType::kF32: return 32;
    case ElementType::kI64: case ElementType::kU64: case ElementType::kF64: case ElementType::kC64: return 64;
    case ElementType::kC128: return 128;
  }
  return 0;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (auto d : dims) {
    s += std::to_string(d);
    s += 'x';
  }
  s += element_name(element);
  s += '>';
  return s;
}

}  // namespace torch_tpu::hlo
