# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live health of a gateway's peer: the UDP ping/pong prober and its state machine (`prober`), the agentless
probe process (`daemon`) and what the peer_health module makes of it on a host (`host`), the Connection status it
writes (`status`), Liqo's peer metrics (`metrics`), a hold on session restarts during a key rotation (`hold`), and
the one-shot tunnel check of tunnel_probe (`tunnel_probe.probe`).
"""
