# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fabric keeps on a host: small files written whole (`atomic_file.write_atomic`), host-wide sysctls
shared by its gateways (`sysctls`), a lock per network namespace (`netns_lock`), the pods' network namespaces seen
from the host (`pod_netns`), and the manifest of what a dataplane run owns there, read back by the controller's
drift checks (`manifest`).
"""
