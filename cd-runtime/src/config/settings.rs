//! The settings of one CD, each key declared once (its type, default and the type it is read
//! as, which validates it), and the one merge rule: the most specific table that sets a key wins
//! (`[cd.<name>]` over `[level.<n>]` over `[defaults]` over the built-in defaults).

use serde::Deserialize;
use toml::Spanned;

use super::faults::ExactFaults;
use super::values::{
    Bytes, CdKindSetting, FaultKind, GroupSize, Interval, LogDurable, LogMedium, Medium,
    Probability, Retries, Seconds,
};
use crate::checkpoint::format::CheckpointPolicy;
use crate::error::FaultKinds;

/// A key of a table as written: its value and its place, if the table sets it.
pub(super) type Key<T> = Option<Spanned<T>>;

/// The value of a key, if the table sets it.
pub(super) fn get<T: Clone>(key: &Key<T>) -> Option<T> {
    key.as_ref().map(|k| k.get_ref().clone())
}

/// Where a key is written, if the table sets it.
pub(super) fn span<T>(key: &Key<T>) -> Option<usize> {
    key.as_ref().map(|k| k.span().start)
}

/// The tables of one CD, most specific first: its name's, its level's, `[defaults]`.
pub(super) type Tables<'a, T> = [Option<&'a T>; 3];

/// How a setting of type `Out` comes from the tables of a CD.
pub(super) trait Merge<Out> {
    /// The value of the most specific of `tables` that sets it, else `default`.
    fn merge(tables: Tables<'_, Self>, default: Out) -> Out;
}

impl<W: Clone + Into<Out>, Out> Merge<Out> for Key<W> {
    fn merge(tables: Tables<'_, Self>, default: Out) -> Out {
        let set = tables.iter().flatten().find_map(|k| k.as_ref());
        set.map_or(default, |k| k.get_ref().clone().into())
    }
}

/// Declares settings (`$settings`, with its `Default`) and their table as written (`$table`,
/// merged key by key): each key once, as `name: type = default, read as Written`; `also` adds
/// fields that are no keys (to each, its `Default`).
macro_rules! settings {
    ($(#[$doc:meta])* $settings:ident, written as $tvis:vis $table:ident {
        $($(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr, read as $written:ty;)*
    } $(also {
        $($(#[$xdoc:meta])* $xvis:vis $xfield:ident: $xty:ty,)*
    } written with {
        $($tfield:ident: $tty:ty,)*
    })?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $settings {
            $($(#[$fdoc])* pub $field: $ty,)*
            $($($(#[$xdoc])* $xvis $xfield: $xty,)*)?
        }

        impl Default for $settings {
            fn default() -> Self {
                $settings { $($field: $default,)* $($($xfield: Default::default(),)*)? }
            }
        }

        #[doc = concat!("[`", stringify!($settings), "`] as one table of the file sets them.")]
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        $tvis struct $table {
            $($tvis $field: $written,)*
            $($($tvis $tfield: $tty,)*)?
        }

        impl Merge<$settings> for $table {
            fn merge(t: Tables<'_, Self>, d: $settings) -> $settings {
                $settings {
                    $($field: Merge::merge(t.map(|t| t.map(|t| &t.$field)), d.$field),)*
                    $($($xfield: d.$xfield,)*)?
                }
            }
        }
    };
}
pub(super) use settings;

settings! {
    /// The settings of one CD, merged from its tables; each key is described in `cd.example.toml`.
    CdSettings, written as pub(super) Layer {
        /// Where `preserve` keeps copies by default.
        medium: Medium = Medium::Local, read as Key<Medium>;
        /// Re-executions after the first execution before escalating.
        retries: u32 = 2, read as Key<Retries>;
        /// Failures this CD contains (others escalate at once).
        contain: FaultKinds = FaultKinds::SOFT.union(FaultKinds::RANK_LOSS),
            read as Key<Vec<FaultKind>>;
        /// Whether this CD appears in the report.
        report: bool = true, read as Key<bool>;
        /// Its fault injector.
        inject: Injection = Injection::default(), read as InjectTable;
        /// Run the CD as this kind whatever the program calls (`None`: as called).
        kind: Option<CdKindSetting> = None, read as Key<CdKindSetting>;
        /// A relaxed CD logs its communication (without logs every failure escalates).
        logging: bool = true, read as Key<bool>;
        /// Past this many bytes of log in memory, the oldest entries go to a file.
        log_spill_bytes: Option<u64> = None, read as Key<Bytes>;
        /// Where a relaxed CD's log survives a rank loss.
        log_medium: LogMedium = LogMedium::Local, read as Key<LogMedium>;
        /// With `log_medium = "buddy"`: when the log reaches the buddy.
        log_durable: LogDurable = LogDurable::Operation, read as Key<LogDurable>;
        /// Check the access classes of relaxed CDs (an internal rpc per remote access).
        check_classes: bool = cfg!(debug_assertions), read as Key<bool>;
        /// Node-level dependency lists of a strict CD around relaxed ones (`None`: learned).
        dependency_tracking: Option<bool> = None, read as Key<bool>;
        /// How often the CD preserves when run with [`crate::strict_steps`].
        interval: Interval = Interval::Every, read as Key<Interval>;
        /// The mean time between failures this CD contains, in seconds.
        mtbf_seconds: Option<f64> = None, read as Key<Seconds>;
        /// Members of a checksum group of the xor medium.
        xor_group: Option<usize> = None, read as Key<GroupSize>;
        /// The job's checkpoints to disk, when this is the CD that writes them.
        checkpoint: Option<CheckpointPolicy> = None, read as Key<CheckpointPolicy>;
    }
}

settings! {
    /// The injector of one CD: probabilities and exact faults.
    Injection, written as pub(super) InjectTable {
        /// Probability that an execution fails its check.
        soft_error: f64 = 0.0, read as Key<Probability>;
        /// Probability that an execution loses the rank's memory.
        rank_loss: f64 = 0.0, read as Key<Probability>;
        /// Faults at exact (rank, iteration) places, at the end of the body or at an operation.
        at: ExactFaults = ExactFaults::default(), read as Key<ExactFaults>;
        /// Probability, per operation of a logging relaxed CD's body, that its check fails.
        soft_error_per_op: f64 = 0.0, read as Key<Probability>;
        /// Probability, per operation of a logging relaxed CD's body, of a rank loss before it.
        rank_loss_per_op: f64 = 0.0, read as Key<Probability>;
    }
}
