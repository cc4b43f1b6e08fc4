"""The contention-tolerant estimator and its tables' fit and check.

`core`: `Estimator` (solo-run model × contention guard, refined online); `table_fit`: fit.json and
guard.json from a table's CSVs; `table_check`: the held-out check; `command`: ``python -m
sglang_mux.estimator fit|check|add-fused|predict``.
"""

from sglang_mux.estimator.core import COLD_START_GUARD, Estimator, from_table_arg
from sglang_mux.estimator.table_check import MAX_REL_ERR, MEAN_REL_ERR, check_table, predict
from sglang_mux.estimator.table_fit import add_fused, fit_fused, fit_table
from sglang_mux.latency_model import PrefillReq
from sglang_mux.roofline import DEFAULT_H100_PROBE
from sglang_mux.tables import TableError

__all__ = ["COLD_START_GUARD", "DEFAULT_H100_PROBE", "MAX_REL_ERR", "MEAN_REL_ERR", "Estimator", "PrefillReq",
           "TableError", "add_fused", "check_table", "fit_fused", "fit_table", "from_table_arg", "predict"]
