// Strided views over a storage's 1-D buffer, in StableHLO: reading a view
// into a dense value and writing a dense value back through a view.
#pragma once

#include <c10/util/ArrayRef.h>

#include "hlo/ops.h"

namespace torch_tpu::lowering {

using hlo::Value;

struct ViewLayout {
  c10::IntArrayRef sizes;
  c10::IntArrayRef strides;
  int64_t offset = 0;
};

// True when the view is the whole storage in row-major order, so a write
// can replace the buffer outright.
bool covers_storage(const ViewLayout& v, int64_t storage_numel);

// The view's elements as a dense value of shape `sizes`. Strided blocks
// (contiguous, transposed, narrowed, stepped, expanded) lower to slices and
// reshapes; anything else gathers by computed index.
Value read_view(Value storage_1d, const ViewLayout& v);

// The same read with the view's start given by `offset`, a rank-0 i64
// runtime operand (v.offset is not read), so one program serves every
// offset of the view (x[i] for each i).
Value read_view_at(Value storage_1d, const ViewLayout& v, Value offset);

// A 1-D storage buffer's bytes read as elements of type `to` (for views
// whose dtype differs from their storage's: view_as_real, view(dtype)).
// Lossless both ways, so writes can store the view's type.
Value reinterpret_storage(Value storage_1d, hlo::ElementType to);

// The storage after writing `update` (shape `sizes`, storage's element
// type) through the view. `storage_1d` is the current buffer.
Value write_view(Value storage_1d, const ViewLayout& v, Value update);

}  // namespace torch_tpu::lowering
