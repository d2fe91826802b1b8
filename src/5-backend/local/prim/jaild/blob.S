/*
** blob.S: the supervisor's static executable (src/5-backend/local/prim/jaild/jaild.c, built
** first) embedded in the library as lsb_jaild_image, so a host needs no
** file of lash's beyond the library to run jailed commands.
*/
	.section .rodata
	.balign 16
	.globl lsb_jaild_image
	.hidden lsb_jaild_image
	.type lsb_jaild_image, @object
lsb_jaild_image:
	.incbin JAILD_PATH
	.globl lsb_jaild_image_end
	.hidden lsb_jaild_image_end
lsb_jaild_image_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
