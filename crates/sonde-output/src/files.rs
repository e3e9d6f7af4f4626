//! Every file a run can write into its output directory, by name: the one list the directory's
//! checks, the writers and the readers share.

use std::fmt;

use crate::writer::Format;

/// A file of a run's output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputFile {
    /// `tcp_flows.tsv` or `tcp_flows.jsonl`: one line per TCP flow.
    TcpFlows(Format),
    /// `udp_flows.tsv` or `udp_flows.jsonl`: one line per UDP flow.
    UdpFlows(Format),
    /// `icmp_flows.tsv` or `icmp_flows.jsonl`: one line per ICMP or ICMPv6 echo session or
    /// other message kind (docs/icmp.md).
    IcmpFlows(Format),
    /// `summary.json`: the [`crate::Summary`] of the run.
    Summary,
    /// `intervals.tsv`: traffic and flows per interval, protocol and direction (`--interval`).
    Intervals,
    /// `quantiles.tsv`: the distributions' quantiles per interval.
    Quantiles,
    /// `histograms.tsv`: the distributions' bins per interval.
    Histograms,
    /// `hosts.tsv` (`--tables`).
    Hosts,
    /// `matrix.tsv` (`--tables`).
    Matrix,
    /// `protocols.tsv` (`--tables`).
    Protocols,
    /// `top.tsv` (`--tables`).
    Top,
    /// `al_hosts.tsv` (`--tables`): RMON2's alHost, by host and application.
    AlHosts,
    /// `al_matrix.tsv` (`--tables`): RMON2's alMatrix, by host pair and application.
    AlMatrix,
    /// `protocol_dir.tsv` (`--tables`): the protocol directory as a hierarchy.
    ProtocolDir,
    /// `al_top.tsv` (`--tables`): the largest hosts, host pairs and applications by bytes.
    AlTop,
    /// `definitions.tsv`: what each flow definition counted per interval and FID.
    Definitions,
    /// `definition_gaps.tsv` (a definition with `gap`).
    DefinitionGaps,
    /// `definition_gap_histogram.tsv` (a definition with `gap`).
    DefinitionGapHistogram,
    /// `definition_flows.tsv` (a definition with `length`).
    DefinitionFlows,
    /// `definition_associations.tsv` (a definitions file with associations).
    DefinitionAssociations,
    /// `definition_association_samples.tsv` (a definitions file with associations): the
    /// samples one by one, up to `--association-samples` per association.
    DefinitionAssociationSamples,
    /// `capture.tsv`: the live capture's counters per interval (`sonde monitor --interval`).
    Capture,
    /// `log_tcp_complete` (`--layout tstat`): Tstat's log of TCP flows seen opening and closing.
    TstatTcpComplete,
    /// `log_tcp_nocomplete` (`--layout tstat`): Tstat's log of the other TCP flows.
    TstatTcpNocomplete,
    /// `log_udp_complete` (`--layout tstat`): Tstat's log of UDP flows.
    TstatUdpComplete,
}

impl OutputFile {
    /// Every file, flow logs in both formats: what [`crate::OutputDir::prepare`] refuses to
    /// overwrite.
    pub const ALL: [OutputFile; 28] = [
        OutputFile::TcpFlows(Format::Tsv),
        OutputFile::UdpFlows(Format::Tsv),
        OutputFile::TcpFlows(Format::Jsonl),
        OutputFile::UdpFlows(Format::Jsonl),
        OutputFile::IcmpFlows(Format::Tsv),
        OutputFile::IcmpFlows(Format::Jsonl),
        OutputFile::Summary,
        OutputFile::Intervals,
        OutputFile::Quantiles,
        OutputFile::Histograms,
        OutputFile::Hosts,
        OutputFile::Matrix,
        OutputFile::Protocols,
        OutputFile::Top,
        OutputFile::AlHosts,
        OutputFile::AlMatrix,
        OutputFile::ProtocolDir,
        OutputFile::AlTop,
        OutputFile::Definitions,
        OutputFile::DefinitionGaps,
        OutputFile::DefinitionGapHistogram,
        OutputFile::DefinitionFlows,
        OutputFile::DefinitionAssociations,
        OutputFile::DefinitionAssociationSamples,
        OutputFile::Capture,
        OutputFile::TstatTcpComplete,
        OutputFile::TstatTcpNocomplete,
        OutputFile::TstatUdpComplete,
    ];

    /// The flow logs of `--layout tstat`, in the order written.
    pub const TSTAT: [OutputFile; 3] =
        [OutputFile::TstatTcpComplete, OutputFile::TstatTcpNocomplete, OutputFile::TstatUdpComplete];

    /// The interval files every `--interval` run writes, in the order written.
    pub const INTERVALS: [OutputFile; 3] = [OutputFile::Intervals, OutputFile::Quantiles, OutputFile::Histograms];

    /// The interval tables `--tables` adds, in the order written.
    pub const TABLES: [OutputFile; 8] = [
        OutputFile::Hosts,
        OutputFile::Matrix,
        OutputFile::Protocols,
        OutputFile::Top,
        OutputFile::AlHosts,
        OutputFile::AlMatrix,
        OutputFile::ProtocolDir,
        OutputFile::AlTop,
    ];

    /// The file's name in the output directory.
    pub const fn name(self) -> &'static str {
        match self {
            OutputFile::TcpFlows(Format::Tsv) => "tcp_flows.tsv",
            OutputFile::TcpFlows(Format::Jsonl) => "tcp_flows.jsonl",
            OutputFile::UdpFlows(Format::Tsv) => "udp_flows.tsv",
            OutputFile::UdpFlows(Format::Jsonl) => "udp_flows.jsonl",
            OutputFile::IcmpFlows(Format::Tsv) => "icmp_flows.tsv",
            OutputFile::IcmpFlows(Format::Jsonl) => "icmp_flows.jsonl",
            OutputFile::Summary => "summary.json",
            OutputFile::Intervals => "intervals.tsv",
            OutputFile::Quantiles => "quantiles.tsv",
            OutputFile::Histograms => "histograms.tsv",
            OutputFile::Hosts => "hosts.tsv",
            OutputFile::Matrix => "matrix.tsv",
            OutputFile::Protocols => "protocols.tsv",
            OutputFile::Top => "top.tsv",
            OutputFile::AlHosts => "al_hosts.tsv",
            OutputFile::AlMatrix => "al_matrix.tsv",
            OutputFile::ProtocolDir => "protocol_dir.tsv",
            OutputFile::AlTop => "al_top.tsv",
            OutputFile::Definitions => "definitions.tsv",
            OutputFile::DefinitionGaps => "definition_gaps.tsv",
            OutputFile::DefinitionGapHistogram => "definition_gap_histogram.tsv",
            OutputFile::DefinitionFlows => "definition_flows.tsv",
            OutputFile::DefinitionAssociations => "definition_associations.tsv",
            OutputFile::DefinitionAssociationSamples => "definition_association_samples.tsv",
            OutputFile::Capture => "capture.tsv",
            OutputFile::TstatTcpComplete => "log_tcp_complete",
            OutputFile::TstatTcpNocomplete => "log_tcp_nocomplete",
            OutputFile::TstatUdpComplete => "log_udp_complete",
        }
    }

    /// The file called `name`, if a run writes one.
    pub fn from_name(name: &str) -> Option<OutputFile> {
        OutputFile::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The name without its extension (`tcp_flows`, `intervals`, `log_tcp_complete`): what
    /// `--outputs` names, whatever the format.
    pub fn stem(self) -> &'static str {
        stem_of(self.name())
    }

    /// Whether this is one of sonde's own flow logs, whose columns Tstat's layout does not
    /// have: who the ends belong to (`--geoip`, `--asn`), Zeek's states and history.
    pub const fn is_sonde_flow_log(self) -> bool {
        matches!(self, OutputFile::TcpFlows(_) | OutputFile::UdpFlows(_))
    }

    /// Whether the file holds a flow's application facts (its columns, or a table by
    /// application): a run writing none of these needs no payload read.
    pub const fn shows_application(self) -> bool {
        matches!(
            self,
            OutputFile::TcpFlows(_)
                | OutputFile::UdpFlows(_)
                | OutputFile::TstatTcpComplete
                | OutputFile::TstatTcpNocomplete
                | OutputFile::TstatUdpComplete
                | OutputFile::AlHosts
                | OutputFile::AlMatrix
                | OutputFile::ProtocolDir
                | OutputFile::AlTop
        )
    }
}

/// The outputs a run writes (`--outputs`), by stem ([`OutputFile::stem`]); summary.json is
/// always written. The default is every output the run's options produce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    only: Option<std::collections::BTreeSet<&'static str>>,
}

impl Outputs {
    /// Every output.
    pub fn all() -> Outputs {
        Outputs { only: None }
    }

    /// Only the outputs of these stems (and summary.json); an unknown stem is an error.
    pub fn only<S: AsRef<str>>(stems: &[S]) -> Result<Outputs, UnknownOutput> {
        let mut only = std::collections::BTreeSet::new();
        for stem in stems {
            let stem = stem.as_ref().trim();
            match OutputFile::ALL.iter().find(|f| f.stem() == stem) {
                Some(f) => only.insert(f.stem()),
                None => return Err(UnknownOutput(stem.to_string())),
            };
        }
        Ok(Outputs { only: Some(only) })
    }

    /// Whether `file` is written.
    pub fn wants(&self, file: OutputFile) -> bool {
        file == OutputFile::Summary || self.only.as_ref().is_none_or(|only| only.contains(file.stem()))
    }

    /// Whether the file called `name` (`tcp_flows.parquet`: any format) is written.
    pub fn wants_name(&self, name: &str) -> bool {
        let stem = stem_of(name);
        stem == OutputFile::Summary.stem() || self.only.as_ref().is_none_or(|only| only.contains(stem))
    }

    /// Whether any of `files` is written.
    pub fn wants_any(&self, files: &[OutputFile]) -> bool {
        files.iter().any(|&f| self.wants(f))
    }

    /// Whether a written output shows application facts ([`OutputFile::shows_application`]).
    pub fn shows_application(&self) -> bool {
        OutputFile::ALL.iter().any(|&f| f.shows_application() && self.wants(f))
    }

    pub fn wants_sonde_flow_log(&self) -> bool {
        OutputFile::ALL.iter().any(|&f| f.is_sonde_flow_log() && self.wants(f))
    }
}

/// A file name without its extension.
fn stem_of(name: &str) -> &str {
    name.split_once('.').map_or(name, |(stem, _)| stem)
}

/// A name given for an output that is no output's stem; its message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownOutput(pub String);

impl fmt::Display for UnknownOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut known: Vec<&str> = Vec::new();
        for file in OutputFile::ALL {
            if !known.contains(&file.stem()) {
                known.push(file.stem());
            }
        }
        write!(f, "'{}' is not an output; the outputs are {}", self.0, known.join(", "))
    }
}

impl std::error::Error for UnknownOutput {}

impl fmt::Display for OutputFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_round_trip() {
        for file in OutputFile::ALL {
            assert_eq!(OutputFile::from_name(file.name()), Some(file));
        }
        let mut names: Vec<&str> = OutputFile::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OutputFile::ALL.len());
        assert_eq!(OutputFile::from_name("notes.txt"), None);
    }

    #[test]
    fn outputs_by_stem() {
        let all = Outputs::all();
        assert!(OutputFile::ALL.iter().all(|&f| all.wants(f)) && all.shows_application());
        let some = Outputs::only(&["tcp_flows", "intervals"]).unwrap();
        assert!(some.wants(OutputFile::TcpFlows(Format::Jsonl)) && some.wants_name("tcp_flows.parquet"));
        assert!(some.wants(OutputFile::Summary) && some.wants_name("summary.json"));
        assert!(!some.wants(OutputFile::UdpFlows(Format::Tsv)) && !some.wants_name("quantiles.arrow"));
        assert!(some.wants_any(&OutputFile::INTERVALS) && !some.wants_any(&OutputFile::TABLES));
        assert!(some.shows_application(), "tcp_flows has application columns");
        assert!(!Outputs::only(&["intervals", "icmp_flows", "hosts"]).unwrap().shows_application());
        assert!(Outputs::only(&["al_top"]).unwrap().shows_application());
        let none = Outputs::only::<&str>(&[]).unwrap();
        assert!(
            none.wants(OutputFile::Summary)
                && !OutputFile::ALL.iter().any(|&f| f != OutputFile::Summary && none.wants(f))
        );
        let e = Outputs::only(&["tcp_flows.tsv"]).unwrap_err().to_string();
        assert!(e.starts_with("'tcp_flows.tsv' is not an output; the outputs are tcp_flows, udp_flows,"), "{e}");
    }

    /// The interval files as sonde-stats names them are the ones listed here, in its order.
    #[test]
    fn interval_files_match_sonde_stats() {
        let names = |files: &[OutputFile]| files.iter().map(|f| f.name()).collect::<Vec<_>>();
        assert_eq!(names(&OutputFile::INTERVALS), sonde_stats::report::FILES);
        assert_eq!(names(&OutputFile::TABLES), sonde_stats::report::TABLE_FILES);
    }
}
