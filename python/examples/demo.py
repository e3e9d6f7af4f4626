"""The Python side of `make demo`: analyse a trace and look at its flows with pandas.

    .venv/bin/python python/examples/demo.py testdata/demo.pcap
"""

import sys

import pandas as pd

import sonde

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)

run = sonde.analyze(sys.argv[1] if len(sys.argv) > 1 else "testdata/demo.pcap")
print(run)
flows = sonde.to_pandas(run.tcp)  # nullable counts stay integers (UInt64), not float64
print(flows[["c_ip", "c_port", "s_ip", "s_port", "c_pkts_all", "s_pkts_all", "c_rtt_avg", "c_pkts_retx"]].head(10))
print("median client RTT:", flows["c_rtt_avg"].median())
print("packets read:", run.summary["packets"]["read"], "| intervals:", run.intervals.num_rows)
