//! Loops through values and through pointer/modifier chains with no concrete type
//! (the kernel's "Loop detected"), and the order of type tags
//! (`btf_check_type_tags`).

use super::*;

impl Validator<'_> {
    /// Loops: the kernel resolves types depth first and reports "Loop detected" when a
    /// type is reached again while still being resolved. Two kinds of loop exist:
    /// through values (modifiers, arrays, members, VARs, DATASECs: infinitely large
    /// types) and through chains of pointers and modifiers with no concrete type at
    /// all. A loop that goes through a pointer into a struct is fine.
    pub(super) fn check_loops(&mut self) {
        let first = self.btf.first_id().0;
        let n = self.btf.types().len();
        // 0 = not visited, 1 = on the stack, 2 = done.
        let mut state = vec![0u8; n];
        let local = |id: TypeId| -> Option<usize> {
            (id.0 >= first && ((id.0 - first) as usize) < n).then(|| (id.0 - first) as usize)
        };
        let mut loops = Vec::new();
        // Value edges.
        let value_edges = |t: &Type, out: &mut Vec<TypeId>| {
            out.clear();
            match &t.kind {
                TypeKind::Ptr(_) | TypeKind::Func { .. } | TypeKind::FuncProto { .. } => {}
                TypeKind::DeclTag { .. } => {}
                k => k.for_each_ref(|r| out.push(r)),
            }
        };
        let mut stack: Vec<(usize, Vec<TypeId>, usize)> = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            let mut edges = Vec::new();
            value_edges(&self.btf.types()[start], &mut edges);
            state[start] = 1;
            stack.push((start, edges, 0));
            while let Some((node, edges, next)) = stack.last_mut() {
                if *next == edges.len() {
                    state[*node] = 2;
                    stack.pop();
                    continue;
                }
                let r = edges[*next];
                *next += 1;
                let Some(j) = local(r) else { continue };
                match state[j] {
                    0 => {
                        let mut e = Vec::new();
                        value_edges(&self.btf.types()[j], &mut e);
                        state[j] = 1;
                        stack.push((j, e, 0));
                    }
                    1 => loops.push(j),
                    _ => {}
                }
            }
        }
        for j in loops {
            self.cur = self.btf.id_at(j);
            self.problem("loop through non-pointer types (a type contains itself)");
        }
        // Pointer/modifier chains: each has one successor, so walk each chain once.
        let mut state = vec![0u8; n];
        let chain_next = |t: &Type| t.kind.ref_target();
        let mut bad = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            let mut path = Vec::new();
            let mut cur = start;
            loop {
                match state[cur] {
                    2 => break,
                    1 => {
                        bad.push(cur);
                        break;
                    }
                    _ => {}
                }
                state[cur] = 1;
                path.push(cur);
                match chain_next(&self.btf.types()[cur]).and_then(local) {
                    Some(j) => cur = j,
                    None => break,
                }
            }
            for p in path {
                state[p] = 2;
            }
        }
        for j in bad {
            self.cur = self.btf.id_at(j);
            self.problem("loop through pointers and modifiers only (no concrete type)");
        }
    }

    /// `btf_check_type_tags`: in a chain of modifiers, TYPE_TAGs come first.
    pub(super) fn check_type_tags(&mut self) {
        let bad = super::chains::bad_type_tag_order(self.btf);
        for i in 0..self.btf.types().len() {
            let id = self.btf.id_at(i).0;
            if bad[id as usize] {
                self.cur = TypeId(id);
                self.problem("TYPE_TAG after a non-tag modifier in a modifier chain");
            }
        }
    }
}
