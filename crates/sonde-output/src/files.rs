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
}

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

    /// The interval files as sonde-stats names them are the ones listed here, in its order.
    #[test]
    fn interval_files_match_sonde_stats() {
        let names = |files: &[OutputFile]| files.iter().map(|f| f.name()).collect::<Vec<_>>();
        assert_eq!(names(&OutputFile::INTERVALS), sonde_stats::report::FILES);
        assert_eq!(names(&OutputFile::TABLES), sonde_stats::report::TABLE_FILES);
    }
}
