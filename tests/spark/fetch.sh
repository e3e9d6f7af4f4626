#!/bin/sh
# Fetches Spark's Kafka source (spark-sql-kafka-0-10 4.2.0, for pyspark 4.2.0) and what it needs
# that pyspark does not already ship, as Maven Central jars into DIR (default
# target/tmp/spark-kafka-4.2.0), for `python -m sonde.spark merge` (which passes them as
# spark.jars) and python/tests/test_spark_merge.py. Does nothing if already there.
# PYSPARK_JARS (default: the jars/ of the pyspark that .venv's python imports) names the jars to
# leave out: a second copy of a jar pyspark has (Spark itself, Scala, Hadoop's client, slf4j)
# in another version would clash with it on the class path.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/tmp/spark-kafka-4.2.0}"
if [ -f "$dir/.complete" ]; then exit 0; fi
command -v mvn >/dev/null || { echo "spark jars: mvn not found (make deps installs maven)" >&2; exit 1; }
python="${PYTHON:-$here/../../.venv/bin/python}"
jars="${PYSPARK_JARS:-$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')}"
[ -d "$jars" ] || { echo "spark jars: no pyspark jars at $jars (make python-env installs pyspark)" >&2; exit 1; }
# artifactIds of the shipped jars: a file name less its -VERSION.jar tail.
shipped="$(ls "$jars" | sed -n 's/-[0-9][^/]*\.jar$//p' | sort -u | paste -sd, -)"
mkdir -p "$dir"
cat > "$dir/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sonde.test</groupId>
  <artifactId>spark-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>4.2.0</version></dependency>
  </dependencies>
</project>
POM
rm -rf "$dir/lib"
(cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime \
  -DexcludeArtifactIds="$shipped")
touch "$dir/.complete"
