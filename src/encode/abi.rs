//! How each target passes arguments: pahole's `arch__nr_register_params`,
//! `arch__set_register_params` and `arch__agg_use_two_regs`, by ELF machine.

use object::elf;

/// How the target passes arguments, by ELF machine: pahole's
/// `arch__nr_register_params`, `arch__set_register_params` and
/// `arch__agg_use_two_regs`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Abi {
    /// Number of argument registers (0: the machine is not analysed).
    pub nr_regs: usize,
    /// The DWARF register of each argument slot, where pahole knows it (on
    /// machines where it does not, any register is as expected).
    pub regs: [Option<u8>; 8],
    /// An aggregate up to two registers wide is passed in two (all but s390).
    pub agg_two_regs: bool,
}

impl Abi {
    pub fn of(machine: u16) -> Abi {
        let known = |r: &[u8]| {
            let mut a = [None; 8];
            for (slot, &reg) in a.iter_mut().zip(r) {
                *slot = Some(reg);
            }
            a
        };
        let (nr_regs, regs) = match machine {
            elf::EM_S390 => (5, known(&[2, 3, 4, 5, 6])),
            elf::EM_X86_64 => (6, known(&[5, 4, 1, 2, 8, 9])),
            elf::EM_SPARC | elf::EM_SPARCV9 => (6, [None; 8]),
            elf::EM_AARCH64 | elf::EM_ARM => (8, known(&[0, 1, 2, 3, 4, 5, 6, 7])),
            elf::EM_ARC | elf::EM_MIPS | elf::EM_PPC | elf::EM_PPC64 | elf::EM_RISCV => {
                (8, [None; 8])
            }
            _ => (0, [None; 8]),
        };
        Abi {
            nr_regs,
            regs,
            agg_two_regs: machine != elf::EM_S390,
        }
    }

    /// The register of argument slot `i`, if pahole knows it.
    pub fn expected(&self, i: usize) -> Option<u8> {
        self.regs.get(i).copied().flatten()
    }
}
