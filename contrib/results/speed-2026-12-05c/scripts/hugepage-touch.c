/* hugepage-touch.c N: per 2 MiB, the cost of touching fresh memory in 4 KiB pages
 * with 8 KiB copies, then MADV_COLLAPSE of it, then touching a fresh
 * MADV_HUGEPAGE range (gcc -O2; run twice: the second run gets memory the
 * first one freed).  Issue 31, speed-2026-12-05c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <errno.h>
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
	int n=atoi(argv[1]); size_t sz=2u<<20; double tt=0,tc=0,th=0; int fails=0;
	char buf[8192]; memset(buf,1,sizeof buf);
	for(int i=0;i<n;i++){
		char*p=mmap(NULL,2*sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
		char*a=(char*)(((uintptr_t)p+sz-1)&~(sz-1));
		double t0=now();
		for(size_t o=0;o<sz;o+=8192) memcpy(a+o,buf,8192);
		double t1=now();
		if(madvise(a,sz,MADV_COLLAPSE)) fails++;
		double t2=now();
		tt+=t1-t0; tc+=t2-t1;
		char*q=mmap(NULL,2*sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
		char*b=(char*)(((uintptr_t)q+sz-1)&~(sz-1));
		madvise(b,sz,MADV_HUGEPAGE);
		double t3=now();
		for(size_t o=0;o<sz;o+=8192) memcpy(b+o,buf,8192);
		th+=now()-t3;
	}
	printf("per 2MiB: 4k-touch %.0f us, collapse %.0f us (%d failed), huge-touch %.0f us\n",tt/n*1e6,tc/n*1e6,fails,th/n*1e6);
}
