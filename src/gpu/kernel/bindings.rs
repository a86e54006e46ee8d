//! The CPU buffers bound to one twin call.

use bytemuck::Pod;

/// The CPU buffers bound to one twin call, in binding order.
pub struct Bindings<'a> {
    slots: Vec<Slot<'a>>,
}

enum Slot<'a> {
    Ro(&'a [u32]),
    Rw(Option<&'a mut [u32]>),
}

impl<'a> Bindings<'a> {
    pub(crate) fn new() -> Self {
        Bindings { slots: Vec::new() }
    }
    pub(crate) fn push_ro(&mut self, words: &'a [u32]) {
        self.slots.push(Slot::Ro(words));
    }
    pub(crate) fn push_rw(&mut self, words: &'a mut [u32]) {
        self.slots.push(Slot::Rw(Some(words)));
    }
    /// Read-only view of binding `i` as `[T]`.
    ///
    /// # Panics
    /// When binding `i` is read-write. The generated twin calls take each binding as the shader
    /// declares it, typed from its WGSL element type, so they cannot get this wrong.
    pub fn ro<T: Pod>(&self, i: usize) -> &'a [T] {
        match &self.slots[i] {
            Slot::Ro(w) => bytemuck::cast_slice(w),
            Slot::Rw(_) => panic!("binding {i} is read-write in the kernel table"),
        }
    }
    /// Read-write view of binding `i` as `[T]` (each may be taken once).
    ///
    /// # Panics
    /// As [`Bindings::ro`].
    pub fn rw<T: Pod>(&mut self, i: usize) -> &'a mut [T] {
        match &mut self.slots[i] {
            Slot::Rw(w) => {
                bytemuck::cast_slice_mut(w.take().expect("read-write binding taken twice"))
            }
            Slot::Ro(_) => panic!("binding {i} is read-only in the kernel table"),
        }
    }
}
