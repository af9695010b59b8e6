# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Liqo's resources and naming conventions: conversion of networking.liqo.io objects between v1alpha1 and v1beta1
(`conversion.convert`), their migration to the CRDs' storage version (`storage_migration.migrate`), a cluster's
identity ConfigMap (`cluster_identity`) and the names of what the fabric makes per remote cluster
(`tenant_names.tenant`). Pure Python, no I/O of their own but through a given `Kube`.
"""
