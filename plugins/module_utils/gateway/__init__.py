# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway (GatewayServer / GatewayClient): the pure plan derived from its CRs (`plan.plan`), its Kubernetes
side (`api`: CRs, key Secret, status and Connection), its keys from a user's Secret (`keys`) and their scheduled
rotation (`key_rotation`), the WgGateway*Template rendering (`template`), the in-cluster controller and pod sides
(`incluster`), its deletion with or without the controller's finalizer run (`finalizer`) and a gateway host's whole
dataplane in one process (`dataplane`).
"""
