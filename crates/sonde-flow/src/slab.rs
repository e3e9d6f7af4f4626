//! A slab of per-flow protocol state: entries addressed by u32, freed entries reused. Its room
//! is reserved up front for the configured flow count and never moved: the reservation is only
//! address space (the allocator maps large blocks lazily), so memory follows the entries
//! actually written, without the slack and copies of a growing vector.

#[derive(Debug)]
pub(crate) struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T: Default> Slab<T> {
    pub fn with_capacity(n: usize) -> Self {
        Slab { items: Vec::with_capacity(n), free: Vec::new() }
    }

    /// An entry in its default state (the caller resets entries before freeing them).
    pub fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            return i;
        }
        self.items.push(T::default());
        (self.items.len() - 1) as u32
    }

    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Reserved bytes never written: address space, not memory.
    pub fn untouched_bytes(&self) -> usize {
        (self.items.capacity() - self.items.len()) * std::mem::size_of::<T>()
    }

    /// Starts loading entry `i` into the cache.
    pub fn prefetch(&self, i: u32) {
        if let Some(item) = self.items.get(i as usize) {
            crate::prefetch(item);
        }
    }

    pub fn get(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}
