//! Reordering arrays by a computed order: a counting sort's order for small integer
//! keys, and a permutation applied in place.

/// The positions of `keys` sorted by key, those of one key in their order (a
/// stable sort's order), found by counting: for keys below a bound of the order of
/// the count, such as indices into a table. Keys far larger than their count are
/// sorted by comparison instead, so that the counts never take more memory than
/// the keys' order of magnitude.
pub fn stable_by_key(keys: &[u32]) -> Vec<u32> {
    let buckets = keys.iter().max().map_or(0, |&k| k as usize + 1);
    if buckets > keys.len().saturating_mul(4).max(1 << 16) {
        let mut order: Vec<u32> = (0..keys.len()).map(pos32).collect();
        order.sort_by_key(|&p| keys[p as usize]);
        return order;
    }
    // Where each key's positions start, then (as they are placed) the next free.
    let mut next = vec![0u32; buckets + 1];
    for &k in keys {
        next[k as usize + 1] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    let mut order = vec![0u32; keys.len()];
    for (pos, &k) in keys.iter().enumerate() {
        let slot = &mut next[k as usize];
        order[*slot as usize] = pos32(pos);
        *slot += 1;
    }
    order
}

/// Reorders `v` so that its `k`-th element is the one at `order[k]` before,
/// moving each element once along the permutation's cycles (no second array of
/// elements). `order` is used up.
pub fn permute_in_place<T>(v: &mut [T], order: &mut [u32]) {
    for i in 0..v.len() {
        let mut cur = i;
        while order[cur] as usize != cur {
            let src = order[cur] as usize;
            order[cur] = pos32(cur);
            if src == i {
                break;
            }
            v.swap(cur, src);
            cur = src;
        }
    }
}

/// A position in an array the callers index with `u32`: they hold fewer than 2^32
/// elements (symbols of one symbol table, records of one run's functions).
#[allow(clippy::cast_possible_truncation)]
fn pos32(i: usize) -> u32 {
    i as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permuting_in_place_follows_every_cycle() {
        // Cycles of lengths 3, 2 and 1, and one of 4 with elements in between.
        let order = [2u32, 0, 1, 4, 3, 5, 9, 6, 7, 8];
        let mut v: Vec<char> = "abcdefghij".chars().collect();
        let want: Vec<char> = order.iter().map(|&i| v[i as usize]).collect();
        permute_in_place(&mut v, &mut order.clone());
        assert_eq!(v, want);
        let mut none: [u8; 0] = [];
        permute_in_place(&mut none, &mut []);
    }

    #[test]
    fn counting_gives_a_stable_sorts_order() {
        let keys = [3u32, 1, 3, 0, 1, 7, 3, 0];
        let mut want: Vec<u32> = (0..8).collect();
        want.sort_by_key(|&p| keys[p as usize]);
        assert_eq!(stable_by_key(&keys), want);
        assert!(stable_by_key(&[]).is_empty());
        let mut v = keys;
        permute_in_place(&mut v, &mut stable_by_key(&keys));
        assert_eq!(v, [0, 0, 1, 1, 3, 3, 3, 7]);
        // Keys far past their count: the same order, by comparison.
        let sparse = [u32::MAX, 5, u32::MAX - 1, 5];
        assert_eq!(stable_by_key(&sparse), [1, 3, 2, 0]);
    }
}
