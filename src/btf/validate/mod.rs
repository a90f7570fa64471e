//! The checks the kernel (`kernel/bpf/btf.c`: `btf_parse_hdr`, `btf_check_all_metas`,
//! `btf_check_all_types`, `btf_check_type_tags`) and libbpf make before they accept BTF.
//!
//! The reader already refuses what it cannot represent (short data, unknown kinds,
//! reserved bits, records running past the type section). The validator checks the
//! rest: the header layout, string offsets, names, type ids, sizes, member offsets and
//! bitfields, DATASEC entries, DECL_TAG targets and loops. It reports every problem it
//! finds, each naming the type id, so a bad encoder output is easy to pin down.
//!
//! Where the kernel's rule depends on the machine it runs on (pointer size), the
//! target's pointer size is guessed from the BTF as libbpf does (the size of `long`),
//! so 32-bit targets' BTF is checked with 4-byte pointers.

use super::*;
use std::fmt;

/// Largest type id the kernel accepts (`BTF_MAX_TYPE`).
pub const MAX_TYPE: u32 = 0x000f_ffff;
/// Largest string offset the kernel accepts (`BTF_MAX_NAME_OFFSET`).
pub const MAX_NAME_OFFSET: u32 = 0x00ff_ffff;
/// Longest name the kernel accepts (`KSYM_NAME_LEN`).
pub const MAX_NAME_LEN: usize = 512;
/// Pointer size assumed when the BTF has no `long` to tell (libbpf's fallback, its
/// own `sizeof(void *)` on a 64-bit host).
const DEFAULT_PTR_SIZE: u32 = 8;

/// libbpf's `determine_ptr_size`: the size of the first 4- or 8-byte INT named as
/// one of C's spellings of `long` / `unsigned long`, base types first; 8 if none.
/// (The kernel checks against its own `sizeof(void *)`, which is the target's.)
pub fn pointer_size(btf: &Btf) -> u32 {
    const LONGS: [&[u8]; 11] = [
        b"long",
        b"long int",
        b"int long",
        b"unsigned long",
        b"long unsigned",
        b"unsigned long int",
        b"unsigned int long",
        b"long unsigned int",
        b"long int unsigned",
        b"int unsigned long",
        b"int long unsigned",
    ];
    (1..=btf.type_count())
        .filter_map(|i| btf.get(TypeId(i)))
        .find_map(|t| match t.kind {
            TypeKind::Int {
                size: size @ (4 | 8),
                ..
            } if btf.str_bytes(t.name).is_some_and(|n| LONGS.contains(&n)) => Some(size),
            _ => None,
        })
        .unwrap_or(DEFAULT_PTR_SIZE)
}

/// One reason a BTF blob is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The offending type, or None for a problem with the header or string section.
    pub id: Option<TypeId>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "type [{id}]: {}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// Checks the layout of a raw BTF blob's header the way the kernel does: the type
/// section first at offset 0, then the kind layout section if there is one, the
/// string section right after them and running to the end of the data, no gaps. (The reader has already checked magic, version, flags,
/// the header length and that both sections lie inside the data.)
pub fn check_layout(data: &[u8]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut bad = |what: String| out.push(Problem { id: None, what });
    if data.len() < read::HEADER_LEN {
        bad(format!("{} bytes, shorter than the BTF header", data.len()));
        return out;
    }
    let big = data[0] == 0xeb;
    let word = |at: usize| {
        let b = [data[at], data[at + 1], data[at + 2], data[at + 3]];
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let (hdr_len, type_off, type_len, str_off, str_len) = (
        word(4) as u64,
        word(8),
        word(12) as u64,
        word(16) as u64,
        word(20) as u64,
    );
    // A header of either byte order may be longer than the classic 24 bytes (libbpf
    // ≥ 1.8 swaps its layout words too); the reader has refused a shorter one. Those
    // words place the kind layout section, if any.
    let layout_len = if hdr_len >= read::LAYOUT_WORDS_END as u64 && data.len() >= 32 {
        let (off, len) = (word(24) as u64, word(28) as u64);
        if len != 0 && off != type_off as u64 + type_len {
            bad(format!(
                "kind layout section at offset {off}, not right after the type section ({})",
                type_off as u64 + type_len
            ));
        }
        len
    } else {
        0
    };
    if type_off != 0 {
        bad(format!(
            "type section at offset {type_off}, not right after the header"
        ));
    }
    if str_off != type_off as u64 + type_len + layout_len {
        bad(format!(
            "string section at offset {str_off}, not right after the type and layout sections ({})",
            type_off as u64 + type_len + layout_len
        ));
    }
    let total = hdr_len + type_len + layout_len + str_len;
    if total != data.len() as u64 {
        bad(format!(
            "header, types, layout and strings make {total} bytes but the data is {} bytes",
            data.len()
        ));
    }
    out
}

/// Checks a parsed BTF (its own types; a split BTF's base is assumed valid) and
/// returns every problem found, in type id order.
pub fn validate(btf: &Btf) -> Vec<Problem> {
    validate_on(btf, false)
}

/// [`validate()`], on two threads if `two_threads`: the checks of each record alone
/// (strings, metas) on one, those that resolve types (and build the chain memo they
/// need) on the other. The problems come in the same order either way. On the
/// corpus vmlinux the two halves take about as long as each other.
pub fn validate_on(btf: &Btf, two_threads: bool) -> Vec<Problem> {
    let ptr_size = pointer_size(btf);
    let validator = |chains| Validator {
        btf,
        out: Vec::new(),
        cur: TypeId(0),
        chains,
        ptr_size,
    };
    let records = || {
        // These checks never resolve a type: no memo.
        let mut v = validator(chains::Chains::empty(ptr_size));
        v.check_strings();
        v.check_metas();
        v.out
    };
    let resolved = || {
        let mut v = validator(chains::Chains::new(btf, ptr_size));
        v.check_types();
        v.check_loops();
        v.check_type_tags();
        v.out
    };
    let (mut out, rest) = if two_threads {
        std::thread::scope(|scope| {
            let rest = scope.spawn(resolved);
            let out = records();
            // A panic on the other thread is this call's, as on one thread.
            (
                out,
                rest.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            )
        })
    } else {
        (records(), resolved())
    };
    out.extend(rest);
    out
}

/// Validates `btf` and returns Ok, or the problems as a [`BtfError::Invalid`].
pub fn check(btf: &Btf) -> Result<(), BtfError> {
    let problems = validate(btf);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(BtfError::Invalid(problems))
    }
}

/// Reads and validates a raw BTF blob: structure, header layout and types.
pub fn parse_checked(data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf, BtfError> {
    parse_checked_on(data, base, false)
}

/// [`parse_checked`], validating on two threads if `two_threads` (see
/// [`validate_on`]).
pub fn parse_checked_on(
    data: &[u8],
    base: Option<Arc<Btf>>,
    two_threads: bool,
) -> Result<Btf, BtfError> {
    let btf = read::parse(data, base)?;
    let mut problems = check_layout(data);
    problems.extend(validate_on(&btf, two_threads));
    if problems.is_empty() {
        Ok(btf)
    } else {
        Err(BtfError::Invalid(problems))
    }
}

/// A type after following modifiers, with the size the kernel gives it.
enum Resolved<'a> {
    /// `void` (id 0).
    Void,
    /// A type with a size (INT, PTR, ARRAY, STRUCT, UNION, ENUM, ENUM64, FLOAT).
    Sized(&'a Type, u32),
    /// A type without a size (FWD, FUNC, FUNC_PROTO, VAR, DATASEC, DECL_TAG).
    Unsized(&'a Type),
    /// A dangling id, a modifier loop or an array whose size overflows.
    Broken,
}

struct Validator<'a> {
    btf: &'a Btf,
    out: Vec<Problem>,
    /// The type being checked.
    cur: TypeId,
    /// Chain ends and array sizes, computed once for all types.
    chains: chains::Chains,
    /// The target's pointer size ([`pointer_size`]).
    ptr_size: u32,
}

/// `btf_name_valid_identifier`: a C identifier of at most `MAX_NAME_LEN` bytes.
fn valid_identifier(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    s.len() <= MAX_NAME_LEN && s.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// A FUNC name: an identifier, or one with `.` past the first character, which
/// kernels since 6.5 accept in every identifier (`__btf_name_char_ok`) and
/// `true_signature` gives optimized clones (`foo.isra.0`).
fn valid_func_name(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    s.len() <= MAX_NAME_LEN
        && s.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')
}

/// `btf_name_valid_section`: non-empty, printable ASCII, at most `MAX_NAME_LEN` bytes.
fn valid_section_name(s: &[u8]) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_LEN && s.iter().all(|c| (0x20..0x7f).contains(c))
}

/// "member #i 'name'" for messages, formatted only when a problem is reported.
struct MemberAt<'b>(&'b Btf, usize, StrOffset);

impl fmt::Display for MemberAt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "member #{} '{}'", self.1, show(self.0, self.2))
    }
}

/// A name for a message (lossy; `?` if the offset is bad).
fn show(btf: &Btf, off: StrOffset) -> String {
    String::from_utf8_lossy(btf.str_bytes(off).unwrap_or(b"?")).into_owned()
}

fn bits_roundup_bytes(bits: u64) -> u64 {
    bits.div_ceil(8)
}

/// `btf_type_int_is_regular`: whole bytes (1, 2, 4, 8 or 16), no bit offset.
fn int_is_regular(bits: u8, offset: u8) -> bool {
    bits.is_multiple_of(8) && offset == 0 && matches!(bits / 8, 1 | 2 | 4 | 8 | 16)
}

impl<'a> Validator<'a> {
    fn problem(&mut self, what: impl Into<String>) {
        self.out.push(Problem {
            id: Some(self.cur),
            what: what.into(),
        });
    }

    fn name(&self, off: StrOffset) -> Option<&'a [u8]> {
        self.btf.str_bytes(off)
    }

    fn show(&self, off: StrOffset) -> String {
        show(self.btf, off)
    }

    /// `btf_name_offset_valid`.
    fn offset_valid(&self, off: StrOffset) -> bool {
        off.0 <= MAX_NAME_OFFSET && off.0 < self.btf.str_end()
    }

    fn check_strings(&mut self) {
        let own = self.btf.strings().len() as u64;
        if own > 0 && own - 1 > MAX_NAME_OFFSET as u64 {
            self.out.push(Problem {
                id: None,
                what: format!("string section of {own} bytes is larger than 16 MiB"),
            });
        }
        if self.btf.base().is_none() && self.btf.types().is_empty() {
            self.out.push(Problem {
                id: None,
                what: "no types (the kernel refuses a base BTF without types)".into(),
            });
        }
        if self.btf.type_count() >= MAX_TYPE {
            self.out.push(Problem {
                id: None,
                what: format!(
                    "{} types, more than the kernel's limit of {}",
                    self.btf.type_count(),
                    MAX_TYPE - 1
                ),
            });
        }
    }

    /// Checks a type id a record refers to: in range of the kernel's limit and of
    /// this BTF. `what` names the field.
    fn check_ref(&mut self, id: TypeId, what: impl Fn() -> String, void_ok: bool) {
        if id.0 == 0 {
            if !void_ok {
                self.problem(format!("{} is void (type id 0)", what()));
            }
        } else if id.0 > self.btf.type_count() || id.0 > MAX_TYPE {
            self.problem(format!(
                "{} refers to type id {id}, past the last type {}",
                what(),
                self.btf.type_count()
            ));
        }
    }
}

mod chains;
mod loops;
mod meta;
mod types;

#[cfg(test)]
mod tests;
