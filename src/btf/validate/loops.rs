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
        // Value edges, appended to `edges`.
        let value_edges = |t: &Type, out: &mut Vec<TypeId>| match &t.kind {
            TypeKind::Ptr(_) | TypeKind::Func { .. } | TypeKind::FuncProto { .. } => {}
            TypeKind::DeclTag { .. } => {}
            k => k.for_each_ref(|r| out.push(r)),
        };
        // The walk's frames: a type, and the range of `edges` (next, end) still to
        // follow from it. A type's edges go after its parent's, so the frames and
        // the edges grow and shrink together: two vectors for the whole walk, where
        // a vector per type took 1.7 million allocations on the corpus vmlinux.
        let mut stack: Vec<(usize, usize, usize)> = Vec::new();
        let mut edges: Vec<TypeId> = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            value_edges(&self.btf.types()[start], &mut edges);
            state[start] = 1;
            stack.push((start, 0, edges.len()));
            while let Some((node, next, end)) = stack.last_mut() {
                if *next == *end {
                    // Its edges, the last in `edges`, are all followed.
                    state[*node] = 2;
                    stack.pop();
                    edges.truncate(stack.last().map_or(0, |f| f.2));
                    continue;
                }
                let r = edges[*next];
                *next += 1;
                let Some(j) = local(r) else { continue };
                match state[j] {
                    0 => {
                        let from = edges.len();
                        value_edges(&self.btf.types()[j], &mut edges);
                        state[j] = 1;
                        stack.push((j, from, edges.len()));
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
        let mut path = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            path.clear();
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
            for &p in &path {
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
