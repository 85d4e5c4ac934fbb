"""Transports between host memory and a device: ``opencl.OpenCLBackend`` and ``cpu.CPUBackend``."""
