"""The verifier's worker processes, started and supervised by the C++ controller.

Roles (one process each, `python -m kernelzero.worker --role ROLE`):
- compile:   static checks and ahead-of-time builds (NVRTC cubins, load_inline extensions); CPU only.
- reference: trusted; runs task modules, keeps reference outputs in its own memory, compares the
             candidate's outputs against them, measures eager / torch.compile baselines.
- candidate: a fork server; every job runs in a fresh sandboxed child that never sees a reference
             output.
"""
