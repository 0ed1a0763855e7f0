"""GPT-2 in plain PyTorch (float32) with a pluggable attention backend."""
