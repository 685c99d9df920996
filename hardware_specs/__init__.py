"""Data only: the catalog, engines, quantization recipes, calibration profiles and curves that planner
reads (see README.md here). It is a package only so that a wheel ships it and importlib.resources finds
it (installed as planner_specs; planner.files.shipped_specs); no module here holds code."""
