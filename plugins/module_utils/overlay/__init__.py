# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The overlay between nodes and gateways: planned from the API for the agentless path (`plan`) and in the
cluster (`incluster`), one Geneve or VXLAN link per node and gateway pair (`link`), and a host's whole overlay
dataplane (links, table 18952, rules, masquerade bypass) applied in one call (`dataplane.sync_overlay_dataplane`).
"""
