"""sonde on Spark (docs/spark.md): ``python -m sonde.spark analyze IN OUT`` analyses every trace
of a directory in the executors, through the Python binding, into a Parquet archive
partitioned by probe and day (``archive``); ``python -m sonde.spark merge …`` merges many
probes' Kafka records into one view (``merge``). Both need ``pyspark``; ``import sonde`` alone
does not."""
