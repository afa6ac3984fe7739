"""gfx950 (CDNA4) functional emulator: decodes a built code object's instruction words and
runs them on numpy.

    from gfx950_emu import load_code_object, run_kernel, GlobalMemory
    co = load_code_object("kernel.co")
    mem = GlobalMemory()
    q_addr = mem.alloc_array(q)                 # any numpy array; returns its address
    stats = run_kernel(co, "kernel_name", grid=(x, y, z), workgroup_size=64 * waves,
                       kernarg=params_bytes, memory=mem, seed=seed)
    out = mem.read(out_addr, np.float32, shape)
    stats.instructions["v_mfma_f32_32x32x16_bf16"]   # dynamic count over all waves

Timing-adversarial: `seed` picks a random interleaving of the waves and random register and
LDS contents at launch; loads land at the latest point their s_waitcnt allows and LDS accesses
of different waves must be ordered by a wait and a barrier, or the run raises EmulatorError.

Import it with tools/ on sys.path. Modules: decode (instruction words -> Instruction, with
decode_scalar / decode_vector / decode_memory per encoding and opcodes, the table gen_opcodes
generates from llvm-mc-22), instruction, operands, elf, codeobject (kernel descriptor),
metadata (the code object's metadata note), disasm (llvm-objdump-22 text, the decoder's test
oracle; decode_check compares the two), state (wave registers; the deferred-completion helpers
memory instructions call), memory (global, LDS), waitcnt (s_waitcnt model), lds_order (LDS
races between waves), isa (dispatch table), isa_scalar / isa_vector / isa_memory / isa_buffer /
isa_dpp / mfma (semantics), run (dispatch and schedule), aiter_args (argument packing for AMD's
aiter kernels, which the tests run to check the emulator against hardware-proven code), timing
(timing mode: run_timed, the waves issued by a cycle model of one CU, for predicted cycle counts)
and timing_params (its parameters, each with its source or marked a calibration knob).
"""
from .codeobject import CodeObject, KernelDescriptor, load_code_object
from .errors import EmulatorError
from .isa import DISPATCH
from .memory import GlobalMemory
from .run import RunStats, run_kernel

__all__ = ["CodeObject", "DISPATCH", "EmulatorError", "GlobalMemory", "KernelDescriptor",
           "RunStats", "load_code_object", "run_kernel"]
