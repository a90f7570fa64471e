//! The error type of the library: what went wrong, and with which file.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error that names the file it concerns.
#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// A BTF blob is malformed.
    Btf {
        /// The file holding it.
        path: PathBuf,
        /// What is wrong.
        err: crate::btf::BtfError,
    },
    /// An input ELF file is malformed or lacks what encoding needs.
    Elf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        err: crate::elf::ElfError,
    },
    /// The DWARF of a file is malformed or not supported: where (unit, DIE) and what.
    Dwarf {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        err: Box<crate::dwarf::error::DwarfError>,
    },
    /// Any other problem with an input or output file (the generic path).
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A problem not tied to one file (bad command line …; the generic path).
    Msg(String),
    /// A refusal worded as pahole words it (scripts may match its text): printed
    /// as it is, without our prefix.
    Refused(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: &Path, err: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            err,
        }
    }

    /// A BTF format error in `path`.
    pub fn btf(path: &Path, err: crate::btf::BtfError) -> Error {
        Error::Btf {
            path: path.to_path_buf(),
            err,
        }
    }

    /// An ELF error in `path`.
    pub fn elf(path: &Path, err: crate::elf::ElfError) -> Error {
        Error::Elf {
            path: path.to_path_buf(),
            err,
        }
    }

    /// A DWARF error in `path`.
    pub fn dwarf(path: &Path, err: crate::dwarf::error::DwarfError) -> Error {
        Error::Dwarf {
            path: path.to_path_buf(),
            err: Box::new(err),
        }
    }

    /// Another problem with `path` (the generic path, worded by the caller).
    pub fn file(path: &Path, msg: impl Into<String>) -> Error {
        Error::File {
            path: path.to_path_buf(),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, err } => write!(f, "{}: {err}", path.display()),
            Error::Btf { path, err } => write!(f, "{}: {err}", path.display()),
            Error::Elf { path, err } => write!(f, "{}: {err}", path.display()),
            Error::Dwarf { path, err } => write!(f, "{}: {err}", path.display()),
            Error::File { path, msg } => write!(f, "{}: {msg}", path.display()),
            Error::Msg(msg) | Error::Refused(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { err, .. } => Some(err),
            Error::Btf { err, .. } => Some(err),
            Error::Elf { err, .. } => Some(err),
            Error::Dwarf { err, .. } => Some(&**err),
            _ => None,
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
