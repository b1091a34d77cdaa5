"""The recorded data's names in one place, as they were imported before the
data had files of their own: Recording and DataError (recording.py), bags
(bag_data.py, on the core's bags.py), CSV files (csv_data.py), the filter
(filtering.py) and a model's coordinates (model_state.py). New code imports
from those modules."""
from mbs_dynamics.bags import MAX_BAG_MESSAGE_BYTES, MAX_BAG_MESSAGES, MAX_BAG_METADATA_BYTES, STORAGES
from mbs_dynamics.identification.bag_data import JOINT_STATE, ODOMETRY, JointFields, read_bag, write_bag
from mbs_dynamics.identification.csv_data import MAX_CSV_BYTES, TIME_ORIGIN, read_csv, write_csv
from mbs_dynamics.identification.filtering import (
    DEFAULT_CUTOFF,
    DEFAULT_ORDER,
    MAX_RESAMPLING,
    UNIFORM_TOLERANCE,
    filtered,
)
from mbs_dynamics.identification.model_state import ModelState, model_state
from mbs_dynamics.identification.recording import (
    BASE_ACCELERATION_COLUMNS,
    BASE_COLUMNS,
    BASE_STATE_COLUMNS,
    QUANTITIES,
    DataError,
    Recording,
)

__all__ = [
    "BASE_ACCELERATION_COLUMNS", "BASE_COLUMNS", "BASE_STATE_COLUMNS", "DEFAULT_CUTOFF", "DEFAULT_ORDER",
    "JOINT_STATE", "MAX_BAG_MESSAGES", "MAX_BAG_MESSAGE_BYTES", "MAX_BAG_METADATA_BYTES", "MAX_CSV_BYTES",
    "MAX_RESAMPLING", "ODOMETRY", "QUANTITIES", "STORAGES", "TIME_ORIGIN", "UNIFORM_TOLERANCE", "DataError",
    "JointFields", "ModelState", "Recording", "filtered", "model_state", "read_bag", "read_csv", "write_bag",
    "write_csv",
]
