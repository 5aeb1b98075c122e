"""KernelZero's Python side: the verifier worker and the fast CUDA launcher (kernelzero.cuda)."""
