"""python -m trainrun.distributed.launch ARGS: PyTorch's deprecated launcher, kept for the scripts that still use
it. It is the trainrun launcher (as torchrun) in torch.distributed.launch's way: each worker also gets
--local-rank=N as its first argument, unless --use-env (then LOCAL_RANK in the environment only, torchrun's way).
It warns as PyTorch's does; new scripts should use trainrun (torchrun)."""
import os
import sys
import warnings

from trainrun.distributed.run import launcher_path

_DEPRECATION = ("The module torch.distributed.launch is deprecated\nand will be removed in future. Use torchrun.\n"
                "Note that --use-env is set by default in torchrun.\nIf your script expects `--local-rank` argument to "
                "be set, please\nchange it to read from `os.environ['LOCAL_RANK']` instead. See \n"
                "https://pytorch.org/docs/stable/distributed.html#launch-utility for \nfurther instructions\n")


def main(args=None):
    warnings.warn(_DEPRECATION, FutureWarning, stacklevel=2)
    path = launcher_path()
    os.execv(path, [path, "--legacy-launch"] + list(sys.argv[1:] if args is None else args))


if __name__ == "__main__":
    main()
