//! [`IndexedHeap`]: the pending wake-ups of numbered things (simulator nodes, connections), one
//! each at most.

/// A binary min-heap of indexes by key, one entry per index, that knows where each index sits:
/// rescheduling moves its one entry instead of adding another, so it never holds more entries
/// than indexes and every operation costs O(log entries). Equal keys leave in no particular
/// (but deterministic) order; make the key unique where order matters.
#[derive(Debug, Clone)]
pub struct IndexedHeap<K> {
    /// (key, index), heap-ordered.
    entries: Vec<(K, usize)>,
    /// Where each index's entry is in `entries`.
    position: Vec<Option<usize>>,
}

impl<K> Default for IndexedHeap<K> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            position: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> IndexedHeap<K> {
    /// The least key and its index.
    #[must_use]
    pub fn peek(&self) -> Option<(K, usize)> {
        self.entries.first().copied()
    }

    /// The key of `index`, if it has one.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<K> {
        let i = self.position.get(index).copied().flatten()?;
        Some(self.entries[i].0)
    }

    /// Sets (or replaces) `index`'s key.
    pub fn set(&mut self, index: usize, key: K) {
        if index >= self.position.len() {
            self.position.resize(index + 1, None);
        }
        match self.position[index] {
            Some(i) => {
                let old = self.entries[i].0;
                self.entries[i].0 = key;
                if key < old {
                    self.up(i);
                } else {
                    self.down(i);
                }
            }
            None => {
                self.entries.push((key, index));
                let i = self.entries.len() - 1;
                self.position[index] = Some(i);
                self.up(i);
            }
        }
    }

    /// Sets `index`'s key, or removes it for `None`.
    pub fn set_or_remove(&mut self, index: usize, key: Option<K>) {
        match key {
            Some(key) => self.set(index, key),
            None => self.remove(index),
        }
    }

    /// Removes `index`'s key, if it has one.
    pub fn remove(&mut self, index: usize) {
        let Some(i) = self.position.get_mut(index).and_then(Option::take) else {
            return;
        };
        let last = self.entries.len() - 1;
        if i != last {
            self.entries.swap(i, last);
            self.position[self.entries[i].1] = Some(i);
        }
        self.entries.pop();
        if i < self.entries.len() {
            self.down(i);
            self.up(i);
        }
    }

    /// Removes and returns the least key and its index if the key is at most `limit`.
    pub fn pop_due(&mut self, limit: K) -> Option<(K, usize)> {
        let (key, index) = self.peek().filter(|&(key, _)| key <= limit)?;
        self.remove(index);
        Some((key, index))
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.entries.swap(a, b);
        self.position[self.entries[a].1] = Some(a);
        self.position[self.entries[b].1] = Some(b);
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.entries[i].0 >= self.entries[parent].0 {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn down(&mut self, mut i: usize) {
        let n = self.entries.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n && self.entries[l].0 < self.entries[least].0 {
                least = l;
            }
            if r < n && self.entries[r].0 < self.entries[least].0 {
                least = r;
            }
            if least == i {
                break;
            }
            self.swap(i, least);
            i = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    use super::IndexedHeap;

    /// The heap against a plain model (a map from index to key, the least key popped first)
    /// over random sets, removals and pops.
    #[test]
    fn pops_what_a_sorted_model_pops() {
        for seed in 0..50u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut heap = IndexedHeap::default();
            let mut model: HashMap<usize, (u64, u64)> = HashMap::new();
            for seq in 0..2000u64 {
                let index = rng.gen_range(0..40);
                match rng.gen_range(0..5) {
                    0 | 1 => {
                        let key = (rng.gen_range(0..100), seq);
                        heap.set(index, key);
                        model.insert(index, key);
                    }
                    2 => {
                        heap.remove(index);
                        model.remove(&index);
                    }
                    3 => {
                        let limit = (rng.gen_range(0..100), u64::MAX);
                        let want = model
                            .iter()
                            .map(|(&n, &k)| (k, n))
                            .min()
                            .filter(|&(k, _)| k <= limit);
                        assert_eq!(heap.pop_due(limit), want, "seed {seed}, op {seq}");
                        if let Some((_, n)) = want {
                            model.remove(&n);
                        }
                    }
                    _ => {
                        let want = model.iter().map(|(&n, &k)| (k, n)).min();
                        assert_eq!(heap.peek(), want, "seed {seed}, op {seq}");
                        if let Some((_, n)) = want {
                            heap.remove(n);
                            model.remove(&n);
                        }
                    }
                }
                assert_eq!(heap.entries.len(), model.len(), "seed {seed}, op {seq}");
                assert_eq!(heap.get(index), model.get(&index).copied(), "seed {seed}");
            }
        }
    }
}
