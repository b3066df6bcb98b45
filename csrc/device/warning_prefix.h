// The reference backend's warning categories (docs/design.md, "Warning
// categories"): every torch_tpu warning starts with its category's path,
// "<TorchTpu/Performance/> ", so that one filter text selects a category and
// its subcategories everywhere Python takes one (filterwarnings, -W,
// PYTHONWARNINGS, pytest): "ignore:<TorchTpu/Performance/". The path ends
// in "/>" so that "<TorchTpu/Performance/>" selects that category alone.
#pragma once

namespace torch_tpu {

enum class WarningCategory {
  kTorchTpu,          // anything else of ours
  kPerformance,       // slower than it could be: a CPU fallback, a recompile per size, a host wait
  kUnoptimizedBuild,  // (reference name; a debug build)
  kTcMalloc,          // (reference name; tcmalloc not loaded)
  kCorrectness,       // a result may differ from PyTorch's
  kApiStage,
  kInternalApi,
  kExperimentalApi,
  kDeprecatedApi,
};

inline constexpr WarningCategory kWarningCategories[] = {
    WarningCategory::kTorchTpu,       WarningCategory::kPerformance,     WarningCategory::kUnoptimizedBuild,
    WarningCategory::kTcMalloc,       WarningCategory::kCorrectness,     WarningCategory::kApiStage,
    WarningCategory::kInternalApi,    WarningCategory::kExperimentalApi, WarningCategory::kDeprecatedApi,
};

// The category's name as Python constants name it ("PERFORMANCE").
constexpr const char* warning_category_name(WarningCategory c) {
  switch (c) {
    case WarningCategory::kTorchTpu: return "TORCH_TPU";
    case WarningCategory::kPerformance: return "PERFORMANCE";
    case WarningCategory::kUnoptimizedBuild: return "UNOPTIMIZED_BUILD";
    case WarningCategory::kTcMalloc: return "TCMALLOC";
    case WarningCategory::kCorrectness: return "CORRECTNESS";
    case WarningCategory::kApiStage: return "API_STAGE";
    case WarningCategory::kInternalApi: return "INTERNAL_API";
    case WarningCategory::kExperimentalApi: return "EXPERIMENTAL_API";
    case WarningCategory::kDeprecatedApi: return "DEPRECATED_API";
  }
  return "TORCH_TPU";
}

// The message prefix, trailing space included.
constexpr const char* warning_prefix(WarningCategory c) {
  switch (c) {
    case WarningCategory::kTorchTpu: return "<TorchTpu/> ";
    case WarningCategory::kPerformance: return "<TorchTpu/Performance/> ";
    case WarningCategory::kUnoptimizedBuild: return "<TorchTpu/Performance/UnoptimizedBuild/> ";
    case WarningCategory::kTcMalloc: return "<TorchTpu/Performance/TcMalloc/> ";
    case WarningCategory::kCorrectness: return "<TorchTpu/Correctness/> ";
    case WarningCategory::kApiStage: return "<TorchTpu/ApiStage/> ";
    case WarningCategory::kInternalApi: return "<TorchTpu/ApiStage/InternalApi/> ";
    case WarningCategory::kExperimentalApi: return "<TorchTpu/ApiStage/ExperimentalApi/> ";
    case WarningCategory::kDeprecatedApi: return "<TorchTpu/ApiStage/DeprecatedApi/> ";
  }
  return "<TorchTpu/> ";
}

}  // namespace torch_tpu
