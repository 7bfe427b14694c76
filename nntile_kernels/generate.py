"""Writes every generated kernel module again from the formulas (nntile_kernels/formulas/,
one module per op family), after a formula or a generator changed:

    python -m nntile_kernels.generate

The generated modules are committed, so importing the kernels never runs a generator;
tests/kernels/test_generated_rules.py fails while any of them differs from what this
writes. Pure Python: imports the generators only.
"""

import sys

from . import (generate_cpu_broadcast, generate_cpu_indexed, generate_cpu_picked,
               generate_cpu_reduce, generate_cpu_rules, generate_cpu_softmax)


def generated() -> dict:
    """{path of a generated module: the source its generator writes now}."""
    files = {generate_cpu_rules.target(module): generate_cpu_rules.module_source(module)
             for module in generate_cpu_rules.MODULES}
    broadcast = generate_cpu_broadcast
    files.update({broadcast.target(module): broadcast.module_source(module)
                  for module in broadcast.MODULES})
    files[generate_cpu_reduce.TARGET] = generate_cpu_reduce.module_source()
    files.update({target: generate_cpu_indexed.module_source(target)
                  for target in generate_cpu_indexed.MODULES})
    files[generate_cpu_picked.TARGET] = generate_cpu_picked.module_source()
    files[generate_cpu_softmax.TARGET] = generate_cpu_softmax.module_source()
    return files


if __name__ == "__main__":
    for path, source in generated().items():
        if not path.exists() or path.read_text() != source:
            path.write_text(source)
            print(f"wrote {path}", file=sys.stderr)
