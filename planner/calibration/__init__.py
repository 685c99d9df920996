"""Calibration: measure the local device (GEMM, attention, convolution, memory-bound kernels,
copies, launch overhead, collectives) into a profile under hardware_specs/calibration/, and
`validate`, which replays measured ops and models against predictions.

It sits above planner/predict/ in the import order because `validate` compares measurements with
predictions; predict never imports calibration: it reads the profiles calibration writes, as data,
through planner/hardware/profile.py.
"""
