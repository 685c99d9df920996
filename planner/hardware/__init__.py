"""The hardware: what a device offers and how efficiently it runs each kind of op.

The catalog (devices, instances, servers, sites, carbon, power model; SI at load), the datasheet
efficiency defaults and the calibration profiles with their fitted efficiency model (measured and
transferred tiers). Imports from planner/workload/ only (op records), never from above.
"""
