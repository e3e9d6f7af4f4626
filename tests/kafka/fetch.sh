#!/bin/sh
# Fetches an Apache Kafka 4.3.1 broker (KRaft) as Maven Central jars into DIR/lib (default
# target/kafka-4.3.1), for the tests that start a real broker. Does nothing if already there.
# Pinned: a version range resolves to 4.4.0, whose kafka-tools-api is missing; slf4j-api 2.0.x
# explicitly, or Maven picks 1.7.36 and the broker fails to start.
set -eu
dir="${1:-$(dirname "$0")/../../target/kafka-4.3.1}"
if [ -f "$dir/lib/.complete" ]; then exit 0; fi
command -v mvn >/dev/null || { echo "kafka jars: mvn not found (make deps installs maven)" >&2; exit 1; }
mkdir -p "$dir"
cat > "$dir/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sonde.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>4.3.1</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>4.3.1</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>2.0.17</version></dependency>
  </dependencies>
</project>
POM
rm -rf "$dir/lib"
(cd "$dir" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime)
touch "$dir/lib/.complete"
