"""netcl.trainer: the training loop (tqdm progress, per-epoch metrics, checkpoints, exact resume,
a stop on divergence, metrics logged to CSV and TensorBoard) and full training checkpoints."""

from ._checkpoint import load_training_checkpoint as load_training_checkpoint
from ._checkpoint import save_training_checkpoint as save_training_checkpoint
from ._divergence import DivergenceError as DivergenceError
from ._loggers import CSVLogger as CSVLogger
from ._loggers import MetricsLogger as MetricsLogger
from ._loggers import TensorBoardLogger as TensorBoardLogger
from ._trainer import EpochMetrics as EpochMetrics
from ._trainer import Trainer as Trainer

__all__ = ["CSVLogger", "DivergenceError", "EpochMetrics", "MetricsLogger",
           "TensorBoardLogger", "Trainer", "load_training_checkpoint",
           "save_training_checkpoint"]
