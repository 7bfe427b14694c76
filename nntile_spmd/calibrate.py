"""python -m nntile_spmd.calibrate: measure this machine's kernel rates, executor
cost and MPI latency/bandwidth into the file nntile_spmd.simulate reads."""

from .simulate.calibrate import main

if __name__ == "__main__":
    main()
