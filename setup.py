# Builds torch_tpu._C from csrc/ against the installed torch (use
# --no-build-isolation). Ninja rebuilds only the files that changed.
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))

ext_modules = []
if os.environ.get("TORCH_TPU_SKIP_EXT") != "1":
    ext_modules.append(
        CppExtension(
            name="torch_tpu._C",
            sources=sources,
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args=["-std=c++20", "-O2", "-fvisibility=hidden", "-Wno-unused-parameter"],
        )
    )

setup(
    ext_modules=ext_modules,
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
