"""compiler/lowering/row_columns.py on hand-written kernels: which row kernels it regroups into vector accesses, and
which it must leave alone because a column's value would depend on where the other columns went."""

from __future__ import annotations

from portable.compiler.lowering.row_columns import regroup_columns
from portable.ir.mlir import ir

KERNEL = """
module attributes {{gpu.container_module}} {{
  gpu.module @k {{
    gpu.func @k(%in: memref<2x512xf32>, %out: memref<2x512xf32>) kernel
        attributes {{known_block_size = array<i32: 64, 1, 1>}} {{
      %c0 = arith.constant 0 : index
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %partial = memref.alloc() : memref<{partial}xf32, #gpu.address_space<workgroup>>
{body}
      gpu.return
    }}
  }}
}}
"""


def _slots(name: str, k: int) -> str:
    return f"      %{name}{k} = arith.addi %t, %c{64 * k} : index\n" if k else ""


def _col(name: str, k: int) -> str:
    return f"%{name}{k}" if k else "%t"


def _body(store) -> str:
    """8 slots per thread (512 columns / 64 threads): x loaded, summed into a partial written to workgroup memory
    and read back, then `store(k)` gives the statement that writes slot k."""
    lines = [f"      %c{64 * k} = arith.constant {64 * k} : index" for k in range(1, 8)]
    for k in range(8):
        lines.append(_slots("j", k).rstrip())
        lines.append(f"      %x{k} = memref.load %in[%row, {_col('j', k)}] : memref<2x512xf32>")
    lines.append("      %s1 = arith.addf %x0, %x1 : f32")
    for k in range(2, 8):
        lines.append(f"      %s{k} = arith.addf %s{k - 1}, %x{k} : f32")
    lines += ["      memref.store %s7, %partial[%c0] : memref<2xf32, #gpu.address_space<workgroup>>",
              "      gpu.barrier",
              "      %sum = memref.load %partial[%c0] : memref<2xf32, #gpu.address_space<workgroup>>"]
    lines += [store(k) for k in range(8)]
    return "\n".join(ln for ln in lines if ln)


def _run(body: str, cols: int = 512, partial: int = 2) -> str:
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(KERNEL.format(body=body, partial=partial).replace("2x512xf32", f"2x{cols}xf32"))
        regroup_columns(m, 4)
        m.operation.verify()
        return str(m)


def _divided(k: int) -> str:
    return (f"      %y{k} = arith.divf %x{k}, %sum : f32\n"
            f"      memref.store %y{k}, %out[%row, {_col('j', k)}] : memref<2x512xf32>")


def test_a_row_chain_becomes_vector_accesses():
    """Thread t's 8 slots become columns 4t..4t+3 and 256+4t..256+4t+3: two vec4 reads, two vec4 writes."""
    text = _run(_body(_divided))
    assert text.count("vector.transfer_read") == 2 and text.count("vector.transfer_write") == 2
    assert "memref.load %arg0" not in text and text.count("memref.store") == 1  # the partial's store stays
    assert "arith.muli %thread_id_x, %c4" in text and "arith.constant 256 : index" in text


def test_a_column_mixed_with_another_is_left_alone():
    """out[t] = x[t] + x[t + 64]: which two columns meet depends on how they are dealt."""
    def mixed(k: int) -> str:
        other = (k + 1) % 8
        return (f"      %y{k} = arith.addf %x{k}, %x{other} : f32\n"
                f"      memref.store %y{k}, %out[%row, {_col('j', k)}] : memref<2x512xf32>")

    text = _run(_body(mixed))
    assert "vector.transfer" not in text and "arith.muli" not in text


def test_a_partial_written_to_global_memory_is_left_alone():
    def partial(k: int) -> str:
        return f"      memref.store %s7, %out[%row, {_col('j', k)}] : memref<2x512xf32>"

    assert "vector.transfer" not in _run(_body(partial))


def test_a_column_value_through_workgroup_memory_is_left_alone():
    """A thread's own column stored to workgroup memory and read back (by any thread) is not followed."""
    def staged(k: int) -> str:
        if k:
            return _divided(k)
        return ("      memref.store %x0, %partial[%c0] : memref<2xf32, #gpu.address_space<workgroup>>\n"
                "      %w = memref.load %partial[%c0] : memref<2xf32, #gpu.address_space<workgroup>>\n"
                "      memref.store %w, %out[%row, %t] : memref<2x512xf32>")

    assert "vector.transfer" not in _run(_body(staged))


def test_a_row_read_in_part_is_left_alone():
    """Slots 0..7 of a 1024-column row (half of it): dealt in runs of 4, they would reach columns past 512."""
    assert "vector.transfer" not in _run(_body(_divided), cols=1024)


def test_a_partial_read_back_by_its_own_thread_is_left_alone():
    """The partial stored at the thread's own element of workgroup memory and read back there is still the
    thread's: writing it out would depend on how the columns are dealt."""
    uniform = _body(lambda k: f"      memref.store %sum, %out[%row, {_col('j', k)}] : memref<2x512xf32>")
    assert "vector.transfer_write" in _run(uniform)  # read at one element for all threads: the combined value
    own = uniform.replace("%partial[%c0] : memref<2xf32", "%partial[%t] : memref<64xf32")
    assert own.count("%partial[%t]") == 2
    assert "vector.transfer" not in _run(own, partial=64)
