# flashprefill: plain nvcc / cc / clang calls. `make` builds build/libflashprefill.so (Hopper, sm_90a, cudart
# static; a link to its SONAME file libflashprefill.so.<ABI major>, exporting flashprefill_* only) and keeps each
# CUDA file's ptxas report in build/<name>.ptxas.txt; a spill, a stack frame or a serialized wgmma fails the build.
# `make ceiling` builds build/libflashprefill_ceiling.so, the wgmma-loop ceiling (cuda/ceiling/: attention's matrix
# products without the softmax, for tools/ceiling.py), under the same ptxas rule; `make all` does not build it.
# `make amd` assembles the gfx950 kernels (asm/gfx950/*.s) into code objects build/gfx950/<name>.co with clang-22 /
# ld.lld-22, or ROCm's own clang / ld.lld where those are not on PATH.

NVCC    ?= nvcc
CC      ?= cc
PYTHON  ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
BUILD   := build

HOPPER  := -gencode=arch=compute_90a,code=sm_90a
CFLAGS  := -O2 -std=gnu11 -fPIC -Wall -Wextra -Werror -Iinclude -Isrc
NVFLAGS := -O3 -std=c++17 $(HOPPER) -Xcompiler -fPIC,-Wall,-Wextra -Iinclude -Isrc -Icuda -Xptxas -v \
           -Werror all-warnings

# The gfx950 assembler and linker: LLVM 22 from PATH when there, else ROCm's LLVM (ROCM_PATH, default /opt/rocm).
ROCM_PATH ?= /opt/rocm
on_path    = $(firstword $(wildcard $(addsuffix /$(1),$(subst :, ,$(PATH)))))
CLANG_AMD ?= $(if $(call on_path,clang-22),clang-22,$(ROCM_PATH)/llvm/bin/clang)
LLD_AMD   ?= $(if $(call on_path,ld.lld-22),ld.lld-22,$(ROCM_PATH)/llvm/bin/ld.lld)
GFX950    := -target amdgcn-amd-amdhsa -mcpu=gfx950 -mcode-object-version=5

# The ABI's major version, read from the header (its one home): the libraries' SONAME. build/libflashprefill.so is
# a link to build/libflashprefill.so.$(ABI_MAJOR), for the linker's -lflashprefill and for Python.
ABI_MAJOR := $(shell sed -n 's/^\#define FLASHPREFILL_VERSION_MAJOR \([0-9]*\)$$/\1/p' include/flashprefill.h)
EXPORTS   := src/exports.map

C_SRC   := $(wildcard src/*.c)
CU_SRC  := $(wildcard cuda/*.cu)
HEADERS := $(wildcard include/*.h src/*.h cuda/*.cuh cuda/fwd/*.cuh)
OBJ     := $(C_SRC:src/%.c=$(BUILD)/%.o) $(CU_SRC:cuda/%.cu=$(BUILD)/%.cu.o)
LIB     := $(BUILD)/libflashprefill.so
AMD_ASM := $(wildcard asm/gfx950/*.s)
AMD_CO  := $(AMD_ASM:asm/gfx950/%.s=$(BUILD)/gfx950/%.co)
AMD_LIB := $(BUILD)/libflashprefill_gfx950.so
AMD_SRC := $(C_SRC) $(wildcard hip/*.c) hip/code_objects.S

# ptxas lines that fail the build: any non-zero spill or stack frame, any serialized wgmma, in any kernel.
PTXAS_BAD := '[1-9][0-9]* bytes (spill|stack frame)|serializ'

# One CUDA file to an object, its ptxas report kept beside it (<object>.ptxas.txt without .cu.o) and checked.
define nvcc_checked
	$(NVCC) $(NVFLAGS) -c $< -o $@ 2> $(@:.cu.o=.ptxas.txt) || { cat $(@:.cu.o=.ptxas.txt); rm -f $@; exit 1; }
	@if grep -Eq $(PTXAS_BAD) $(@:.cu.o=.ptxas.txt); then \
	  grep -E $(PTXAS_BAD) $(@:.cu.o=.ptxas.txt); rm -f $@; echo "ptxas report of $< is not clean"; exit 1; fi
endef

CEILING_SRC := $(wildcard cuda/ceiling/*.cu)
CEILING_OBJ := $(CEILING_SRC:cuda/ceiling/%.cu=$(BUILD)/ceiling/%.cu.o)
CEILING_LIB := $(BUILD)/libflashprefill_ceiling.so

.PHONY: all amd ceiling test demo bench gpu-check clean
all: $(LIB)

$(BUILD):
	mkdir -p $@

$(BUILD)/%.o: src/%.c $(HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: cuda/%.cu $(HEADERS) | $(BUILD)
	$(nvcc_checked)

$(LIB): $(LIB).$(ABI_MAJOR)
	ln -sf $(notdir $<) $@

$(LIB).$(ABI_MAJOR): $(OBJ) $(EXPORTS)
	$(NVCC) $(HOPPER) -shared -cudart static -Xlinker --version-script=$(EXPORTS) \
	  -Xlinker -soname=$(notdir $@) -o $@ $(OBJ)

amd: $(AMD_CO) $(AMD_LIB)

ceiling: $(CEILING_LIB)

$(BUILD)/ceiling:
	mkdir -p $@

$(BUILD)/ceiling/%.cu.o: cuda/ceiling/%.cu $(HEADERS) $(wildcard cuda/ceiling/*.cuh cuda/ceiling/*.h) | $(BUILD)/ceiling
	$(nvcc_checked)

# Its own last error (src/error.c); exports fp_wgmma_loop_* only.
$(CEILING_LIB): $(CEILING_OBJ) $(BUILD)/error.o cuda/ceiling/exports.map
	$(NVCC) $(HOPPER) -shared -cudart static -Xlinker --version-script=cuda/ceiling/exports.map -o $@ \
	  $(CEILING_OBJ) $(BUILD)/error.o

# The gfx950 host library: the same front end (src/), the HIP loader and launcher (hip/), the code objects
# embedded; no ROCm needed to build or load it (libamdhip64.so is dlopened on first use).
$(AMD_LIB): $(AMD_LIB).$(ABI_MAJOR)
	ln -sf $(notdir $<) $@

$(AMD_LIB).$(ABI_MAJOR): $(AMD_SRC) $(AMD_CO) $(HEADERS) $(wildcard hip/*.h) $(EXPORTS)
	$(CC) $(CFLAGS) -Ihip -shared -Wl,--version-script=$(EXPORTS),-soname=$(notdir $@) -o $@ $(AMD_SRC) \
	  -ldl -lpthread -lm

$(BUILD)/gfx950:
	mkdir -p $@

$(BUILD)/gfx950/%.co: asm/gfx950/%.s $(wildcard asm/gfx950/*.inc) | $(BUILD)/gfx950
	$(CLANG_AMD) $(GFX950) -Iasm/gfx950 -c $< -o $(BUILD)/gfx950/$*.o
	$(LLD_AMD) -shared $(BUILD)/gfx950/$*.o -o $@

test: all amd ceiling
	PYTHONPATH=python $(PYTHON) -m pytest -ra

demo: all
	PYTHONPATH=python $(PYTHON) tools/demo.py

bench: all
	PYTHONPATH=python $(PYTHON) tools/bench.py

gpu-check: all
	PYTHONPATH=python $(PYTHON) tools/gpu_check.py

clean:
	rm -rf $(BUILD)
