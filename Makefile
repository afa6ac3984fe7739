# flashprefill: plain nvcc / cc / clang calls. `make` builds build/libflashprefill.so (Hopper, sm_90a, cudart
# static) and keeps each CUDA file's ptxas report in build/<name>.ptxas.txt; a spill, a stack frame or a
# serialized wgmma fails the build. `make amd` assembles the gfx950 kernels (asm/gfx950/*.s) into code objects
# build/gfx950/<name>.co with clang-22 / ld.lld-22.

NVCC    ?= nvcc
CC      ?= cc
PYTHON  ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
BUILD   := build

HOPPER  := -gencode=arch=compute_90a,code=sm_90a
CFLAGS  := -O2 -std=gnu11 -fPIC -Wall -Wextra -Werror -Iinclude -Isrc
NVFLAGS := -O3 -std=c++17 $(HOPPER) -Xcompiler -fPIC,-Wall,-Wextra -Iinclude -Isrc -Icuda -Xptxas -v \
           -Werror all-warnings

CLANG_AMD := clang-22
LLD_AMD   := ld.lld-22
GFX950    := -target amdgcn-amd-amdhsa -mcpu=gfx950 -mcode-object-version=5

C_SRC   := $(wildcard src/*.c)
CU_SRC  := $(wildcard cuda/*.cu)
HEADERS := $(wildcard include/*.h src/*.h cuda/*.cuh cuda/fwd/*.cuh)
OBJ     := $(C_SRC:src/%.c=$(BUILD)/%.o) $(CU_SRC:cuda/%.cu=$(BUILD)/%.cu.o)
LIB     := $(BUILD)/libflashprefill.so
AMD_ASM := $(wildcard asm/gfx950/*.s)
AMD_CO  := $(AMD_ASM:asm/gfx950/%.s=$(BUILD)/gfx950/%.co)
AMD_LIB := $(BUILD)/libflashprefill_gfx950.so
AMD_SRC := $(C_SRC) $(wildcard hip/*.c) hip/code_objects.S

# ptxas lines that fail the build: any non-zero spill or stack frame, any serialized wgmma.
PTXAS_BAD := '[1-9][0-9]* bytes (spill|stack frame)|serializ'

.PHONY: all amd test demo bench gpu-check clean
all: $(LIB)

$(BUILD):
	mkdir -p $@

$(BUILD)/%.o: src/%.c $(HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: cuda/%.cu $(HEADERS) | $(BUILD)
	$(NVCC) $(NVFLAGS) -c $< -o $@ 2> $(BUILD)/$*.ptxas.txt || { cat $(BUILD)/$*.ptxas.txt; rm -f $@; exit 1; }
	@if grep -Eq $(PTXAS_BAD) $(BUILD)/$*.ptxas.txt; then \
	  grep -E $(PTXAS_BAD) $(BUILD)/$*.ptxas.txt; rm -f $@; echo "ptxas report of $< is not clean"; exit 1; fi

$(LIB): $(OBJ)
	$(NVCC) $(HOPPER) -shared -cudart static -o $@ $(OBJ)

amd: $(AMD_CO) $(AMD_LIB)

# The gfx950 host library: the same front end (src/), the HIP loader and launcher (hip/), the code objects
# embedded; no ROCm needed to build or load it (libamdhip64.so is dlopened on first use).
$(AMD_LIB): $(AMD_SRC) $(AMD_CO) $(HEADERS) $(wildcard hip/*.h)
	$(CC) $(CFLAGS) -Ihip -shared -o $@ $(AMD_SRC) -ldl -lpthread -lm

$(BUILD)/gfx950:
	mkdir -p $@

$(BUILD)/gfx950/%.co: asm/gfx950/%.s $(wildcard asm/gfx950/*.inc) | $(BUILD)/gfx950
	$(CLANG_AMD) $(GFX950) -Iasm/gfx950 -c $< -o $(BUILD)/gfx950/$*.o
	$(LLD_AMD) -shared $(BUILD)/gfx950/$*.o -o $@

test: all amd
	PYTHONPATH=python $(PYTHON) -m pytest tests -ra

demo: all
	PYTHONPATH=python $(PYTHON) tools/demo.py

bench: all
	PYTHONPATH=python $(PYTHON) tools/bench.py

gpu-check: all
	PYTHONPATH=python $(PYTHON) tools/gpu_check.py

clean:
	rm -rf $(BUILD)
