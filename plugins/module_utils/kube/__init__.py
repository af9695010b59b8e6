# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes API access shared by the modules and the controller: where a cluster is and how to authenticate
(`config`), a small REST client over one kept-alive connection (`rest`), the fabric's verbs and conditions over it
(`client.Kube`, the entry point), server-side apply of object lists (`apply`), who holds a Lease (`lease`) and the
conversion webhook's certificate (`webhook_cert`). Standard library and PyYAML only.
"""
