"""Count how often a rank that leaves a running job early is named (docs/reliability.md).

    python scripts/fault_trials.py --fault kill|term|exit --runner launch|mpiexec \
        [--trials 20] [--ranks 4]

Each trial starts a job on --ranks ranks that executes a small compiled graph in a loop;
after 30 steps a random rank other than 0 ends itself (SIGKILL, SIGTERM or os._exit(0)).
A trial counts as named when the job exits non-zero and the first line naming a rank
names that one: the launcher's own line under the launcher, a rank's line under plain
mpiexec. Takes 5-10 s a trial on a laptop; not part of the test suite.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = """
import os, signal, sys
import numpy as np
import nntile_spmd as nt
from mpi4py import MPI

fault, victim = sys.argv[1], int(sys.argv[2])
g = nt.LogicalGraph("trial")
nt.ops.relu(g.tensor([64], "x", dtype="fp64", external=True), "y").mark_output()
cg = nt.compile(g)
cg.bind_data("x", np.ones(64))
for step in range(100000):
    cg.execute()
    cg.get_output("y")
    if step == 30 and MPI.COMM_WORLD.rank == victim:
        if fault == "exit":
            os._exit(0)
        os.kill(os.getpid(), {"kill": signal.SIGKILL, "term": signal.SIGTERM}[fault])
"""
NAMED = {"launch": re.compile(r"nntile_spmd\.launch: error: rank (\d+) \(pid"),
         "mpiexec": re.compile(r"\[rank \d+\] (?:the job cannot end: )?rank (\d+) \(pid")}


def trial(script, runner, ranks, fault, victim, env):
    program = [str(script), fault, str(victim)]
    head = ([sys.executable, "-m", "nntile_spmd.launch", "-n", str(ranks)] if runner == "launch"
            else ["mpiexec", "-n", str(ranks), sys.executable])
    result = subprocess.run([*head, *program], env=env, capture_output=True, text=True,
                            timeout=120)
    found = NAMED[runner].search(result.stdout + result.stderr)
    return result.returncode, int(found[1]) if found else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=("kill", "term", "exit"), required=True)
    parser.add_argument("--runner", choices=("launch", "mpiexec"), required=True)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--ranks", type=int, default=4)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    named = 0
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder, "job.py")
        script.write_text(JOB)
        for number in range(1, args.trials + 1):
            victim = random.randrange(1, args.ranks)
            code, blamed = trial(script, args.runner, args.ranks, args.fault, victim, env)
            named += code != 0 and blamed == victim
            print(f"trial {number}: rank {victim} {args.fault}, exit {code}, named rank "
                  f"{blamed}", flush=True)
    print(f"{args.fault} under {args.runner}, {args.ranks} ranks: named {named} of "
          f"{args.trials}")


if __name__ == "__main__":
    main()
