"""sonde's Spark jobs: `python -m sonde.spark analyze` (trace archives) and `python -m sonde.spark
merge` (many probes' Kafka records into one view). docs/spark.md."""
