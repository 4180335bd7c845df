"""Multi-GPU ResNet-50 training benchmark suite."""
