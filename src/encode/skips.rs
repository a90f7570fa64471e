//! Why a function is left out of the BTF: the records behind pahole's `--verbose`
//! lines (`NAME : skipping BTF encoding of function due to REASON`). They are owned
//! (the name is copied from the ELF function table), made while the saved functions
//! are merged after the last unit, in name order, so they do not depend on `-j`.

use std::fmt;

/// One line of pahole's function-skip log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSkip {
    /// The function's name in the ELF function table.
    pub name: String,
    /// What pahole says after "due to".
    pub reason: SkipReason,
}

/// The reasons, as pahole words them (its spelling included: scripts grep them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Two units' prototypes have different parameter counts (a merge note; the
    /// function is then left out as inconsistent under `consistent_func`).
    ParamCount(u32, u32),
    /// Two units' prototypes return different types (a merge note).
    ReturnType,
    /// Parameter `index` (from 1) differs in type between two units (a merge note),
    /// with both units' names of it.
    ParamType {
        /// 1-based position.
        index: usize,
        /// The first unit's name of the parameter.
        first: String,
        /// The other unit's name of it.
        other: String,
    },
    /// A parameter is not in the register the calling convention puts it in.
    UnexpectedReg,
    /// Units disagree on the prototype (`consistent_func`).
    Inconsistent,
    /// A packed struct is passed on the stack.
    UncertainParmLoc,
    /// A parameter moved relative to the abstract origin.
    ReorderedParm,
    /// Optimized-out parameters where the signature changed.
    OptimizedParms,
    /// The name has symbols at several addresses.
    AmbiguousAddr,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::ParamCount(a, b) => {
                write!(f, "param count mismatch; {a} params != {b} params")
            }
            SkipReason::ReturnType => f.write_str("return type mismatch"),
            SkipReason::ParamType {
                index,
                first,
                other,
            } => write!(
                f,
                "param type mismatch for param#{index} {first} != {other}"
            ),
            SkipReason::UnexpectedReg => f.write_str("unexpected register usage for parameter"),
            SkipReason::Inconsistent => f.write_str("inconsistet prototype"),
            SkipReason::UncertainParmLoc => f.write_str("uncertain parameter location"),
            SkipReason::ReorderedParm => f.write_str("reordered parameters"),
            SkipReason::OptimizedParms => f.write_str("optimized parameters"),
            SkipReason::AmbiguousAddr => f.write_str("ambiguous address"),
        }
    }
}

impl fmt::Display for FuncSkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} : skipping BTF encoding of function due to {}",
            self.name, self.reason
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_pahole_s() {
        let line = |reason| {
            FuncSkip {
                name: "f".into(),
                reason,
            }
            .to_string()
        };
        assert_eq!(
            line(SkipReason::ParamCount(1, 0)),
            "f : skipping BTF encoding of function due to param count mismatch; 1 params != 0 params"
        );
        assert_eq!(
            line(SkipReason::ParamType {
                index: 1,
                first: "kobj".into(),
                other: "dev".into()
            }),
            "f : skipping BTF encoding of function due to param type mismatch for param#1 kobj != dev"
        );
        assert_eq!(
            line(SkipReason::Inconsistent),
            "f : skipping BTF encoding of function due to inconsistet prototype"
        );
    }
}
