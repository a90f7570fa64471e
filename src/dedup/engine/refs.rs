//! The reference kinds (PTR, the modifiers, FUNC, TYPE_TAG, DECL_TAG, ARRAY,
//! FUNC_PROTO, and libbpf 1.1's TYPEDEF), once what they refer to is canonical:
//! libbpf's recursive `btf_dedup_ref_type`, walked with an explicit stack.

use super::super::flat::*;
use super::hash::*;
use super::{invalid, Engine, IN_PROGRESS, MAX_ID};
use crate::dedup::{Compat, DedupError};

/// Why the walk stopped, as a word: the error is built once, at the top.
#[derive(Clone, Copy)]
enum Bad {
    /// Reference types loop through this one.
    Loop(u32),
    /// This type is of a kind the earlier passes should have handled.
    Unprocessed(u32),
}

impl Engine {
    /// Dedups the reference type `root` after the types it refers to.
    pub(super) fn ref_type(&mut self, root: u32) -> Result<u32, DedupError> {
        let mut stack = std::mem::take(&mut self.ref_stack);
        stack.clear();
        let res = self.ref_walk(root, &mut stack);
        self.ref_stack = stack;
        res.map_err(|bad| match bad {
            Bad::Loop(id) => DedupError::Loop { id },
            Bad::Unprocessed(id) => {
                let k = self.kind(id);
                invalid(
                    id,
                    format!("kind {k} left unprocessed before the reference pass"),
                )
            }
        })
    }

    fn ref_walk(&mut self, root: u32, stack: &mut Vec<(u32, usize)>) -> Result<u32, Bad> {
        // Some(canonical id) of the type just entered or finished, to store in its
        // referrer's record.
        let mut value = self.ref_enter(root, stack)?;
        loop {
            let Some(&(id, child)) = stack.last() else {
                return Ok(value.expect("a finished walk has a value"));
            };
            let o = self.offs[id as usize] as usize;
            let info = self.w[o + 1];
            if let Some(v) = value.take() {
                self.w[o + ref_pos(info, child - 1)] = v;
            }
            if child < ref_count(info) {
                let top = stack.len() - 1;
                stack[top].1 += 1;
                let target = self.w[o + ref_pos(info, child)];
                value = self.ref_enter(target, stack)?;
                continue;
            }
            stack.pop();
            value = Some(self.ref_finish(id));
        }
    }

    /// Starts `id`: its canonical id if known, else marks it in progress and pushes it.
    #[inline]
    fn ref_enter(&mut self, id: u32, stack: &mut Vec<(u32, usize)>) -> Result<Option<u32>, Bad> {
        let m = self.map[id as usize];
        if m == IN_PROGRESS {
            return Err(Bad::Loop(id));
        }
        if m <= MAX_ID {
            return Ok(Some(self.resolve(id)));
        }
        match self.kind(id) {
            K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_FUNC | K_TYPE_TAG | K_DECL_TAG
            | K_ARRAY | K_FUNC_PROTO => {}
            K_TYPEDEF if self.compat == Compat::Libbpf1_1 => {}
            _ => return Err(Bad::Unprocessed(id)),
        }
        self.map[id as usize] = IN_PROGRESS;
        stack.push((id, 0));
        Ok(None)
    }

    /// All of `id`'s references are canonical: find its equal or make it canonical.
    fn ref_finish(&mut self, id: u32) -> u32 {
        let t = self.rec(id);
        let k = t.kind();
        let h = ref_hash(t);
        let mut new = id;
        let mut node = self.table.first(h);
        while let Some((c, next)) = self.table.next(node) {
            node = next;
            let (t, cr) = (self.rec(id), self.rec(c));
            let eq = match k {
                K_DECL_TAG => equal_int_tag(t, cr),
                K_ARRAY => equal_array(t, cr),
                K_FUNC_PROTO => t.words() == cr.words(),
                _ => equal_common(t, cr),
            };
            if eq {
                new = c;
                break;
            }
        }
        self.map[id as usize] = new;
        if new == id {
            self.table_add(h, id);
        }
        new
    }
}

/// Number of referenced ids the reference pass resolves for a record with `info`.
#[inline]
fn ref_count(info: u32) -> usize {
    match kind_of(info) {
        K_ARRAY => 2,
        K_FUNC_PROTO => 1 + vlen_of(info),
        _ => 1,
    }
}

/// Word index of the `i`-th referenced id, in libbpf's order (an array's element
/// type before its index type; a prototype's return type before its parameters).
#[inline]
fn ref_pos(info: u32, i: usize) -> usize {
    match kind_of(info) {
        K_ARRAY => ARRAY_ELEM_POS + i,
        K_FUNC_PROTO if i > 0 => param_type_pos(i - 1),
        _ => TYPE_POS,
    }
}
