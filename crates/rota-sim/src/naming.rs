//! Stable names: the FNV-1a hash the simulated clouds and kubelets derive names, addresses
//! and template hashes from (the same run after run), the scale set AKS names an agent
//! pool's VMs after, and a scale set VM's computer name (its node's name). A leaf: the
//! cloud and the kubelets both name things from here.

use rota_core::fleet::owner::ManagedGroup;

/// FNV-1a: a small stable hash (names and template hashes must not change between runs).
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The scale set of an AKS agent pool, as AKS names it: `aks-<pool>-<8 digits>-vmss`, the
/// digits a hash of the cluster (stable, so a pool's nodes keep their names across runs).
pub fn aks_scale_set(m: &ManagedGroup) -> Option<String> {
    let ManagedGroup::AksAgentPool {
        subscription_id,
        resource_group,
        aks_cluster,
        agent_pool,
    } = m
    else {
        return None;
    };
    let cluster = format!("{subscription_id}/{resource_group}/{aks_cluster}");
    let digits = fnv(cluster.as_bytes()) % 100_000_000;
    Some(format!("aks-{agent_pool}-{digits:08}-vmss"))
}

/// A scale set VM's computer name, which its node registers under: the scale set's name and
/// the VM's ordinal in six base-36 digits (`aks-general-12345678-vmss00000a` for VM 10).
pub fn vmss_computer_name(scale_set: &str, ordinal: u64) -> String {
    let mut n = ordinal;
    let mut digits = Vec::new();
    for _ in 0..6 {
        digits.push(std::char::from_digit((n % 36) as u32, 36).unwrap());
        n /= 36;
    }
    digits.reverse();
    format!("{scale_set}{}", digits.into_iter().collect::<String>())
}
